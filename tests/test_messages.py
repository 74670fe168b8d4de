"""Messages and threads: typed values with a stable, versioned JSON form."""

from __future__ import annotations

import base64
import json

import pytest

from loom_nb import Message, PendingApproval, TextPart, Thread, ToolCall, ToolResult, Usage
from loom_nb._messages import FORMAT_VERSION, arguments_digest, new_thread_id


def sample_thread() -> Thread:
    thread = Thread(id=new_thread_id(), agent="analyst", user_id="ann", title="Orders")
    thread.messages = [
        Message.user("Which orders are open?"),
        Message(
            "assistant",
            [TextPart("Looking."), ToolCall("c1", "select", {"table": "orders"})],
            usage=Usage(120, 30, 1),
            model="test:replay",
        ),
        Message("tool", [ToolResult("c1", "select", "2 rows", data={"rows": [1, 2]})]),
        Message(
            "tool", [ToolResult("c2", "bad", '{"error": "x"}', is_error=True, approval="rejected")]
        ),
    ]
    thread.pending = [PendingApproval("c3", "insert", {"rows": [{"a": 1}]}, preview={"rows": 1})]
    return thread


def test_json_round_trip_is_exact():
    thread = sample_thread()
    data = json.loads(json.dumps(thread.to_dict()))
    assert data["version"] == FORMAT_VERSION
    again = Thread.from_dict(data)
    assert again == thread
    assert again.to_dict() == thread.to_dict()


def test_messages_carry_no_storage_ids():
    data = sample_thread().to_dict()
    for message in data["messages"]:
        assert set(message) <= {"role", "parts", "created_at", "usage", "model"}


def test_thread_from_a_newer_format_says_to_upgrade():
    data = sample_thread().to_dict()
    data["version"] = FORMAT_VERSION + 1
    with pytest.raises(ValueError, match="pip install -U loom-nb"):
        Thread.from_dict(data)


def test_thread_ids_are_128_bit_random_and_url_safe():
    ids = {new_thread_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert not any(i.startswith("-") for i in ids)  # "%loom resume -x..." reads like an option
    for i in list(ids)[:50]:
        assert len(base64.urlsafe_b64decode(i + "==")) == 16
        assert all(c.isalnum() or c in "-_" for c in i)


def test_status_usage_and_text_helpers():
    thread = sample_thread()
    assert thread.status == "awaiting_approval"
    assert thread.usage == Usage(120, 30, 1)
    assert thread.messages[1].text == "Looking."
    assert thread.last_text == "Looking."
    thread.pending = []
    thread.error = "boom"
    assert thread.status == "error"


def test_digest_is_independent_of_key_order():
    assert arguments_digest({"a": 1, "b": [1, 2]}) == arguments_digest({"b": [1, 2], "a": 1})
    assert arguments_digest({"a": 1}) != arguments_digest({"a": 2})


def test_dataframes_in_tool_results_round_trip_and_are_listed_as_frames():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"id": [1, 2], "when": pd.to_datetime(["2024-01-01", None], utc=True)})
    thread = sample_thread()
    thread.messages.append(Message("tool", [ToolResult("c9", "select", "2 rows", data=df)]))
    again = Thread.from_dict(json.loads(json.dumps(thread.to_dict())))
    assert len(again.frames) == 1
    pd.testing.assert_frame_equal(again.frames[0], df)


def test_where_a_run_was_interrupted_is_kept_through_a_store(tmp_path) -> None:
    """The Interrupted part (written by the run after an interrupted one) is saved and read
    back by SQLite as it was, and the models are never given it."""
    from loom_nb._messages import Interrupted
    from loom_nb.models.anthropic import map_messages as anthropic_messages
    from loom_nb.models.openai import map_messages as openai_messages
    from loom_nb.sqlite import sqlite_store

    store = sqlite_store(tmp_path / "t.db")
    thread = Thread(id="t1", agent="a")
    store.save_thread(thread)
    store.append(thread, Message.user("go"))
    store.append(thread, Message("tool", [Interrupted()]))
    saved = store.load("t1").messages
    assert saved[1].role == "tool" and saved[1].interruptions == [Interrupted()]
    assert saved[1].to_dict()["parts"] == [{"kind": "interrupted", "text": Interrupted().text}]
    assert openai_messages(None, saved) == [{"role": "user", "content": "go"}]
    assert anthropic_messages(saved) == [
        {"role": "user", "content": [{"type": "text", "text": "go"}]}
    ]
    store.close()
