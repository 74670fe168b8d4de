"""Threads written through a store the way an agent writes them, for the store suites, and the
write whose approval the lifecycle tests follow."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from loom_nb import Message, Store, TextPart, Thread, Tool, tool

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=timezone.utc)


def make(
    store: Store,
    thread_id: str,
    *,
    agent: str = "a",
    user: str | None = None,
    texts: tuple[str, ...] = ("hi",),
    at: datetime = T0,
) -> Thread:
    """A saved thread of user messages ``texts``, one a second from ``at``."""
    thread = Thread(id=thread_id, agent=agent, user_id=user, created_at=at, updated_at=at)
    store.save_thread(thread)
    for i, text in enumerate(texts):
        add(store, thread, Message("user", [TextPart(text)], created_at=at + timedelta(seconds=i)))
    return thread


def add(store: Store, thread: Thread, message: Message) -> None:
    thread.messages.append(message)
    thread.updated_at = message.created_at
    store.append(thread, message)


def dumped(thread: Thread | None) -> str | None:
    """A thread's whole JSON form, to compare two threads field by field."""
    return None if thread is None else json.dumps(thread.to_dict(), sort_keys=True)


def writer(log: list[str]) -> Tool:
    """``write_note(text)``, a write that needs approval: it appends ``text`` to ``log``."""

    @tool(needs_approval=True, preview=lambda args: {"will_write": args["text"]})
    def write_note(text: str) -> str:
        """Write a note."""
        log.append(text)
        return "written"

    return write_note
