"""A thread written by a newer loom_nb, read by this one on every store: a message part of a
kind it does not know and a pending call in a state it does not know are kept exactly as
written (through this version's own writes to the thread), shown as "from a newer loom_nb:
upgrade to see this", and refused with that message, never a bare error or a stuck thread."""

from __future__ import annotations

import pytest

from loom_nb import (
    Message,
    PendingApproval,
    ReplayModel,
    Store,
    Thread,
    ToolCall,
    UserError,
    define_agent,
)
from loom_nb._messages import NEWER, NewerPart

# A part and a call as a newer version might write them (a kind, a state and a key unknown here).
NEWER_PART = {"kind": "audio", "url": "https://example.test/a.ogg", "seconds": 3.5}
NEWER_CALL = {
    "call_id": "c-new",
    "tool": "insert",
    "arguments": {"row": 1},
    "digest": "0123456789abcdef",
    "state": "paused",
    "paused_until": "2030-01-01T00:00:00+00:00",
}


def newer_message() -> Message:
    return Message.from_dict(
        {
            "role": "assistant",
            "created_at": "2026-01-01T00:00:00+00:00",
            "parts": [{"kind": "text", "text": "Here:"}, NEWER_PART, {"kind": "text", "text": "!"}],
        }
    )


def test_an_unknown_part_kind_is_kept_and_round_trips():
    message = newer_message()
    assert message.text == "Here:!"  # what this version can show
    [part] = message.newer_parts
    assert isinstance(part, NewerPart) and part.kind == "audio"
    assert message.to_dict()["parts"][1] == NEWER_PART
    assert Message.from_dict(message.to_dict()).to_dict() == message.to_dict()


def test_an_unknown_call_state_is_kept_and_round_trips():
    call = PendingApproval.from_dict(NEWER_CALL)
    assert call.newer and call.state == "paused"
    assert call.to_dict() == NEWER_CALL


def saved(store: Store) -> Thread:
    thread = Thread(id="t-newer", agent="a")
    store.save_thread(thread)
    store.append(thread, Message.user("hi"))
    store.append(thread, newer_message())
    asking = Message("assistant", [ToolCall("c-new", "insert", {"row": 1})])
    store.append(thread, asking, pending=[PendingApproval.from_dict(NEWER_CALL)])
    return thread


def test_a_store_keeps_them_as_written(store: Store):
    saved(store)
    loaded = store.load("t-newer")
    assert loaded is not None
    assert loaded.messages[1].to_dict()["parts"][1] == NEWER_PART
    assert [p.to_dict() for p in loaded.pending] == [NEWER_CALL]
    # This version's own writes to the thread leave the newer call as it was.
    store.append(loaded, Message.user("again"))
    store.acquire_lease("t-newer", "h:1:x", 30)
    store.release_lease("t-newer", "h:1:x", error=None)
    again = store.load("t-newer")
    assert again is not None and [p.to_dict() for p in again.pending] == [NEWER_CALL]
    assert again.messages[1].to_dict() == loaded.messages[1].to_dict()


def test_the_agent_refuses_to_move_a_newer_call_and_says_upgrade(store: Store):
    saved(store)
    agent = define_agent(name="a", model=ReplayModel(["never"]), store=store)
    thread = agent.thread("t-newer")  # loads: no bare error
    assert thread.status == "awaiting_approval"
    for attempt in (
        lambda: agent.run_sync("more", thread_id="t-newer"),
        lambda: agent.resume_sync("t-newer", {}),
        lambda: agent.resume_sync("t-newer", {"c-new": True}),
    ):
        with pytest.raises(UserError, match="a state from a newer loom_nb: upgrade") as refused:
            attempt()
        assert "pip install -U loom-nb" in str(refused.value)
    loaded = store.load("t-newer")
    assert loaded is not None and [p.to_dict() for p in loaded.pending] == [NEWER_CALL]
    assert len(loaded.messages) == 3  # nothing was added


def test_the_notebook_shows_them_as_from_a_newer_version(store: Store):
    import io

    from loom_nb.notebook.cards import ApprovalCard
    from loom_nb.notebook.text import TextView

    saved(store)
    thread = store.load("t-newer")
    assert thread is not None
    out = io.StringIO()
    TextView(title="a", out=out).render(thread)
    printed = out.getvalue()
    assert printed.count(NEWER) == 2 and "'paused'" in printed
    card = ApprovalCard(thread.pending[0], thread_id=thread.id)
    assert NEWER in card.header.value and card.offers() == []
    from loom_nb.notebook.widgets import ThreadView

    view = ThreadView(agent_name="a")
    view.render(thread)
    shown = [getattr(c, "value", "") for c in view.body.children]
    assert any(NEWER in v for v in shown)
    assert [NEWER in c.header.value for c in view.cards] == [True]
