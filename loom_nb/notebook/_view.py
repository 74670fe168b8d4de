"""What the session and the commands use of a thread's view, widgets or text alike.

``widgets.ThreadView`` (a Jupyter frontend) and ``text.TextView`` (terminal IPython, scripts)
both implement it; nothing else of a view is touched outside its own module.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

from loom_nb._agent import RunResult
from loom_nb._events import RunEvent
from loom_nb._messages import Resolution, Thread


class View(Protocol):
    """One thread on screen: a saved thread drawn whole, or a run followed as it streams."""

    #: The thread shown (None until a new thread's first event names it).
    thread_id: str | None

    def show(self) -> None:
        """Put the view in the cell's output."""

    def render(self, thread: Thread, *, history: bool = True, now: Collection[str] = ()) -> None:
        """Draw a saved thread: its messages (unless ``history=False``), pending calls (the
        calls in ``now`` with their preview read again: "rows as they are now"), error."""

    def begin(self) -> None:
        """A run starts (the view says the agent is working)."""

    def on_event(self, event: RunEvent) -> None:
        """Follow the run: streamed text, completed messages, approvals asked for."""

    def finish(self, result: RunResult | None, error: BaseException | None) -> None:
        """The run ended with ``result`` (None when it has none) or ``error``."""

    def mark_decided(
        self, call_ids: Collection[str], approve: bool | Resolution | str, note: str
    ) -> None:
        """Show that these calls were decided elsewhere (``%loom approve``): no more buttons."""
