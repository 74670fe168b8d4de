"""The run context: what one run knows about itself, handed to tools and connector factories."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from loom_nb._messages import ToolResult


@dataclass
class RunContext(Mapping[str, Any]):
    """Who runs, in which thread, with what the caller passed.

    It reads like the mapping the caller gave as ``context=`` (``ctx["jwt"]``), and carries
    the run's identity as attributes. ``state`` lives for one run: connectors cache the clients
    their factories made there, so a factory runs once per run. ``approved_preview`` is what
    the user's approval card showed (the tool's preview) when a call runs after approval, so a
    tool can refuse to do more than the card said; it is None otherwise.
    """

    agent: str
    thread_id: str
    user_id: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict, repr=False)
    approved_preview: Any = field(default=None, repr=False)
    #: Reads the thread's tool results; the run gives it (:meth:`tool_results` is the way in).
    _results: Callable[[], Iterable[ToolResult]] = field(default=tuple, repr=False)

    def tool_results(self) -> list[ToolResult]:
        """This thread's tool results so far, oldest first, as copies: what a tool may refer
        to by call id (the ``chart`` tool draws one). The calls of the model turn being run
        have no result yet."""
        return [copy.copy(r) for r in self._results()]

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)

    def __hash__(self) -> int:  # Mapping sets __hash__ to None; a context is used as an identity
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other
