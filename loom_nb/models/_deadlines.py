"""How long a provider may take: the timeout settings, checked, with their defaults.

Three waits bound every model turn, so a provider can stall a cell for a known time at most:

- ``connect_timeout`` (10 s): opening the connection;
- ``idle_timeout`` (60 s): the wait for the answer to start, then between two stream events;
- ``turn_timeout`` (300 s): the whole turn, retries and their backoff included, so a stream
  that trickles forever is cut too.

``timeout`` keeps the meaning the SDKs give it: one value for each network wait (connecting,
and each read), so it sets ``connect_timeout`` and ``idle_timeout`` at once; the specific keys
win over it.
"""

from __future__ import annotations

import asyncio
import math
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from loom_nb._errors import UserError

DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_IDLE_TIMEOUT = 60.0
DEFAULT_TURN_TIMEOUT = 300.0

TIMEOUT_KEYS = ("timeout", "connect_timeout", "idle_timeout", "turn_timeout")


@dataclass(frozen=True)
class Deadlines:
    """The three waits of a model turn, in seconds."""

    connect: float = DEFAULT_CONNECT_TIMEOUT
    idle: float = DEFAULT_IDLE_TIMEOUT
    turn: float = DEFAULT_TURN_TIMEOUT

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> Deadlines:
        """The waits ``settings`` ask for; :class:`UserError` naming the key on a bad value."""
        check_settings(settings)
        shared = settings.get("timeout")
        connect = settings.get("connect_timeout", shared or DEFAULT_CONNECT_TIMEOUT)
        idle = settings.get("idle_timeout", shared or DEFAULT_IDLE_TIMEOUT)
        # Raising one wait past the default turn deadline must not get it cut by that deadline.
        turn = settings.get("turn_timeout", max(DEFAULT_TURN_TIMEOUT, connect + idle))
        return cls(float(connect), float(idle), float(turn))


def check_settings(settings: object) -> None:
    """Raise :class:`UserError` naming the key when a timeout setting is not a positive number
    of seconds (``define_agent`` calls this, so the mistake shows before any run)."""
    if not isinstance(settings, Mapping):
        raise UserError(
            "model_settings must be a dict like {'temperature': 0}, "
            f"got {type(settings).__name__}"
        )
    for key in TIMEOUT_KEYS:
        if key not in settings:
            continue
        value = settings[key]
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value <= 0
        ):
            raise UserError(
                f"model_settings[{key!r}] must be a positive number of seconds, got {value!r}"
            )


class Expired(Exception):
    """Raised by :func:`expires_at` when its deadline passed."""


@asynccontextmanager
async def expires_at(when: float) -> AsyncIterator[None]:
    """Cancel what the block awaits at loop time ``when`` and raise :class:`Expired`.

    The block runs in the caller's task (no task is spawned, unlike ``asyncio.wait_for``), so
    an SDK's connection pool sees the same task enter and leave it.
    """
    if sys.version_info >= (3, 11):
        timer = asyncio.timeout_at(when)
        try:
            async with timer:
                yield
        except TimeoutError:
            if timer.expired():
                raise Expired("the deadline passed") from None
            raise
    else:  # pragma: no cover - Python 3.10 has no asyncio.timeout_at
        async with _timeout_at_310(when):
            yield


@asynccontextmanager
async def _timeout_at_310(when: float) -> AsyncIterator[None]:
    """``asyncio.timeout_at`` for Python 3.10: cancel the current task when the time comes."""
    task = asyncio.current_task()
    assert task is not None
    fired = False

    def fire() -> None:
        nonlocal fired
        fired = True
        task.cancel()

    handle = asyncio.get_running_loop().call_at(when, fire)
    try:
        yield
    except asyncio.CancelledError:
        if fired:
            raise Expired("the deadline passed") from None
        raise
    finally:
        handle.cancel()
