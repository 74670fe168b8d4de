"""Bounded retries of a model request before its first event, with backoff."""

from __future__ import annotations

import random
from dataclasses import dataclass

from loom_nb._errors import UserError


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries with exponential backoff.

    ``max_retries`` extra attempts at most (so ``max_retries + 1`` requests in all); the n-th
    wait is ``initial_delay * 2**n`` capped at ``max_delay``, minus up to 25 % jitter. A
    ``Retry-After`` from the server is honoured up to ``max_retry_after`` seconds; a longer
    one stops the retries at once, since waiting that long inside a notebook cell is worse
    than a clear error.
    """

    max_retries: int = 2
    initial_delay: float = 0.5
    max_delay: float = 8.0
    max_retry_after: float = 60.0

    def __post_init__(self) -> None:
        if not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise UserError(f"max_retries must be an int >= 0, got {self.max_retries!r}")
        if self.initial_delay < 0 or self.max_delay < 0:
            raise UserError("retry delays must be >= 0 seconds")

    def delay(self, retry: int, retry_after: float | None) -> float | None:
        """Seconds to wait before retry number ``retry`` (0-based); None: do not retry."""
        if retry_after is not None:
            return retry_after if retry_after <= self.max_retry_after else None
        base = min(self.initial_delay * (2.0**retry), self.max_delay)
        return base * (1.0 - 0.25 * random.random())
