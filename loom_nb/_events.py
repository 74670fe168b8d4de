"""What a run reports while it streams: the events ``on_event`` receives.

Plain values, so the agent loop, the agent and the notebook layer can all name them without
importing each other.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from loom_nb._messages import Message, PendingApproval
from loom_nb._numbers import TracedNumber
from loom_nb.models import TextDelta

__all__ = ["ApprovalRequested", "EventHandler", "MessageAdded", "RunEvent"]


@dataclass
class MessageAdded:
    """A message completed and was saved."""

    message: Message
    #: The thread it was saved in (known before the run returns, e.g. for a new thread).
    thread_id: str | None = None
    #: An assistant's message: the numbers it states, traced to the thread's results
    #: (``check_numbers="off"``: none). ``message`` is their message's index in the thread.
    numbers: tuple[TracedNumber, ...] = ()


@dataclass
class ApprovalRequested:
    """The run stopped: these calls wait for Approve / Reject."""

    pending: list[PendingApproval]
    thread_id: str | None = None


#: What ``on_event`` receives while a run streams.
RunEvent = TextDelta | MessageAdded | ApprovalRequested
#: ``on_event``: a plain or async function of one event.
EventHandler = Callable[[RunEvent], Awaitable[None] | None]
