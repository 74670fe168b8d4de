"""The store contract, one suite over every store (memory, SQLite, PostgreSQL as a
least-privileged role): what an agent and a user can count on whichever store keeps threads.

Search is shared where every store agrees: whole words and phrases, case-insensitive (Unicode
casefold), in message text and tool results, punctuation as typed. A piece of a word ("venue"
or "reve" in "revenue") is found by memory and SQLite, which match any substring, and not by
PostgreSQL's word index (tests/postgres/ states that).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest

from loom_nb import (
    Message,
    PendingApproval,
    Store,
    TextPart,
    Thread,
    ToolCall,
    ToolResult,
    Usage,
    UserError,
)
from loom_nb._store import ThreadVersion, VersionedStore
from tests.stores._threads import T0, add, dumped, make
from tests.stores.conftest import Backend


def ids(infos: list) -> list[str]:
    return [i.id for i in infos]


def orders_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": pd.array([1, 2, None], dtype="Int64"),
            "status": pd.array(["open", "paid", None], dtype="string"),
            "total": [120.5, np.nan, 99.0],
            "created_at": pd.to_datetime(["2025-01-06", "2025-01-07", None]).tz_localize("UTC"),
            "kind": pd.Categorical(["web", "shop", "web"]),
            "flag": [True, False, True],
        },
        index=pd.Index([10, 20, 30], name="order_no"),
    )


# ---- round trips -----------------------------------------------------------------------------


def test_a_rich_thread_reads_back_exactly_in_a_new_store(backend: Backend, store: Store):
    assert isinstance(store, Store)
    paris = timezone(timedelta(hours=1))
    thread = Thread(
        id="rich",
        agent="analyst",
        user_id="ann",
        title="Orders ✓",
        created_at=datetime(2025, 3, 1, 13, 0, 0, 123456, tzinfo=paris),
        updated_at=datetime(2025, 3, 1, 13, 0, 0, 123456, tzinfo=paris),
    )
    store.save_thread(thread)
    messages = [
        Message.user("Which orders are open? ÄÖÜ ✓ \x00 end"),
        Message(
            "assistant",
            [
                TextPart("Let me look."),
                ToolCall("call_a", "select", {"table": "orders", "limit": 50}),
                ToolCall("call_b", "select", None, raw_arguments="{not json"),
            ],
            usage=Usage(120, 30, 1),
            model="test:replay",
        ),
        Message(
            "tool",
            [
                ToolResult("call_a", "select", "<data rows=3>...</data>", orders_frame()),
                ToolResult("call_b", "select", '{"error": "bad"}', is_error=True),
                ToolResult("call_c", "insert", "done", {"b": 1, "a": [1, "two", None]}, "approved"),
                ToolResult("call_d", "chart", "Drew a bar chart", chart={"kind": "bar", "y": None}),
            ],
        ),
    ]
    for m in messages:
        add(store, thread, m)
    thread.pending = [
        PendingApproval("call_w", "insert", {"rows": [{"title": "R7"}]}, orders_frame().head(1))
    ]
    thread.error = "ModelError: test:replay failed"
    store.save_thread(thread)

    again = backend.open()
    loaded = again.load("rich", user_id="ann")
    assert dumped(loaded) == dumped(thread)
    assert loaded is not None and loaded.created_at.utcoffset() == timedelta(hours=1)
    assert loaded.usage == Usage(120, 30, 1) and loaded.status == "awaiting_approval"
    assert loaded.pending[0].digest == thread.pending[0].digest
    assert list(loaded.messages[2].tool_results[2].data) == ["b", "a"]  # key order kept
    if again is not store:
        again.close()


def test_dataframes_keep_their_dtypes_and_index(backend: Backend, store: Store):
    thread = make(store, "frames", texts=())
    saved = orders_frame()
    add(store, thread, Message("tool", [ToolResult("c1", "select", "rows", saved)]))
    again = backend.open()
    loaded = again.load("frames")
    assert loaded is not None
    [frame] = loaded.frames
    pd.testing.assert_frame_equal(frame, saved)
    assert [str(t) for t in frame.dtypes] == [
        "Int64",
        "string",
        "float64",
        "datetime64[us, UTC]",
        "category",
        "bool",
    ]
    assert frame.index.name == "order_no"
    if again is not store:
        again.close()


def test_save_thread_keeps_the_messages_and_append_touches_the_record(store: Store):
    thread = make(store, "t1", texts=("one", "two"))
    thread.title = "Renamed"
    store.save_thread(thread)
    loaded = store.load("t1")
    assert loaded is not None and [m.text for m in loaded.messages] == ["one", "two"]
    assert loaded.title == "Renamed"
    [info] = store.list()
    assert (info.message_count, info.updated_at) == (2, T0 + timedelta(seconds=1))


def test_loaded_threads_are_copies(store: Store):
    make(store, "t1")
    loaded = store.load("t1")
    assert loaded is not None
    loaded.messages.append(Message.user("not saved"))
    loaded.title = "changed"
    again = store.load("t1")
    assert again is not None and len(again.messages) == 1 and again.title is None


def test_append_to_an_unsaved_thread_fails_and_writes_nothing(store: Store):
    with pytest.raises(KeyError, match="never saved"):
        store.append(Thread(id="ghost", agent="a"), Message.user("lost"))
    assert store.load("ghost") is None and store.list() == []


# ---- listing ---------------------------------------------------------------------------------


def test_lists_most_recently_updated_first_by_agent_and_by_page(store: Store):
    old = make(store, "old", agent="a", at=T0)
    make(store, "new", agent="b", at=T0 + timedelta(hours=1))
    mid = make(store, "mid", agent="a", at=T0 + timedelta(minutes=30), texts=("x", "y", "z"))
    assert ids(store.list()) == ["new", "mid", "old"]
    assert ids(store.list(agent="a")) == ["mid", "old"]
    assert ids(store.list(limit=1, offset=1)) == ["mid"]
    assert ids(store.list(limit=2, offset=2)) == ["old"]
    assert store.list(limit=0) == [] and store.list(offset=3) == []
    info = store.list(agent="a")[0]
    assert (info.message_count, info.pending_count) == (3, 0)
    assert (info.created_at, info.updated_at) == (mid.created_at, mid.updated_at)
    old.updated_at = T0 + timedelta(hours=2)
    add(store, old, Message("user", [TextPart("again")], created_at=old.updated_at))
    assert ids(store.list()) == ["old", "new", "mid"]


def test_timestamps_in_other_zones_sort_by_instant_and_ties_by_creation(store: Store):
    paris = timezone(timedelta(hours=1))
    make(store, "utc", at=datetime(2025, 3, 1, 11, 30, tzinfo=timezone.utc))
    make(store, "paris", at=datetime(2025, 3, 1, 12, 0, tzinfo=paris))  # 11:00 UTC
    make(store, "tie-1", at=T0 - timedelta(days=1))
    make(store, "tie-2", at=T0 - timedelta(days=1))
    assert ids(store.list()) == ["utc", "paris", "tie-1", "tie-2"]


def test_pending_calls_are_counted_in_listings(store: Store):
    thread = make(store, "t1")
    thread.pending = [PendingApproval("c1", "insert", {"x": 1}), PendingApproval("c2", "x", {})]
    store.save_thread(thread)
    assert store.list()[0].pending_count == 2


# ---- search ----------------------------------------------------------------------------------


def test_search_finds_words_and_phrases_case_insensitively(store: Store):
    make(store, "revenue", texts=("Total revenue by month, Q1",))
    make(store, "umlaut", texts=("Straße in MÜNCHEN",), at=T0 + timedelta(minutes=1))
    make(store, "other", texts=("nothing to see",), at=T0 + timedelta(minutes=2))
    assert ids(store.search("revenue")) == ["revenue"]
    assert ids(store.search("TOTAL REVENUE")) == ["revenue"]
    assert ids(store.search("month, q1")) == ["revenue"]
    assert store.search("revenue total") == []  # a phrase keeps its order
    assert store.search("total, revenue") == []  # and its punctuation
    assert ids(store.search("strasse")) == ["umlaut"]  # casefold: ß is ss
    assert ids(store.search("münchen")) == ["umlaut"]
    assert store.search("absent") == []


def test_search_reads_tool_results_not_the_json_around_them(store: Store):
    thread = make(store, "tool", texts=())
    result = ToolResult("c1", "query", "<data rows=3>Invoice INV-7</data>", {"secret": "kiwi"})
    add(store, thread, Message("tool", [result]))
    assert ids(store.search("invoice")) == ["tool"]
    assert ids(store.search("inv-7")) == ["tool"]
    assert store.search("kiwi") == []  # structured data is not searched
    assert store.search("call_id") == [] and store.search("parts") == []


def test_search_takes_text_literally(store: Store):
    make(store, "quoted", texts=('say "hi"\nthen 50% and _ literally in C:\\tmp',))
    make(store, "plain", texts=("say hi then", "and literally"), at=T0 - timedelta(hours=1))
    assert ids(store.search('say "hi"\nthen')) == ["quoted"]
    assert ids(store.search("50% and _")) == ["quoted"]
    assert ids(store.search("%")) == ["quoted"]  # no LIKE wildcards, and no words at all
    assert ids(store.search("_")) == ["quoted"] and store.search("50_") == []
    assert ids(store.search("c:\\tmp")) == ["quoted"] and store.search("c:\\\\tmp") == []
    assert ids(store.search("and")) == ["quoted", "plain"]


def test_search_is_newest_first_limited_and_scoped(store: Store):
    for i in range(4):
        make(store, f"t{i}", texts=("the orders report",), at=T0 + timedelta(minutes=i))
    make(store, "b", agent="b", texts=("the orders report",), at=T0 + timedelta(hours=1))
    make(store, "ann", user="ann", texts=("the orders report",), at=T0 + timedelta(hours=2))
    assert ids(store.search("orders")) == ["b", "t3", "t2", "t1", "t0"]
    assert ids(store.search("orders", limit=2)) == ["b", "t3"]
    assert ids(store.search("orders", agent="a", limit=2)) == ["t3", "t2"]
    assert ids(store.search("orders", user_id="ann")) == ["ann"]


# ---- users -----------------------------------------------------------------------------------


def test_a_foreign_thread_reads_exactly_like_an_unknown_one(store: Store):
    make(store, "ann-1", user="ann", texts=("ann's secret plan",))
    make(store, "open-1", user=None, texts=("no auth here",))
    for user in ("bob", None):
        assert store.load("ann-1", user_id=user) is None
        assert not store.delete("ann-1", user_id=user)
        assert "ann-1" not in ids(store.list(user_id=user))
        assert store.search("secret", user_id=user) == []
    assert store.load("open-1", user_id="ann") is None
    assert ids(store.list(user_id="ann")) == ["ann-1"]
    loaded = store.load("ann-1", user_id="ann")
    assert loaded is not None and loaded.messages[0].text == "ann's secret plan"


# ---- delete ----------------------------------------------------------------------------------


def test_delete_removes_the_thread_and_its_messages(store: Store):
    make(store, "t1", texts=("one", "two"))
    make(store, "t2")
    assert store.delete("t1")
    assert store.load("t1") is None and not store.delete("t1")
    assert ids(store.list()) == ["t2"] and store.search("two") == []
    make(store, "t1", texts=("fresh",))  # the same id again starts empty
    loaded = store.load("t1")
    assert loaded is not None and [m.text for m in loaded.messages] == ["fresh"]


# ---- thread versions: how a kernel knows a thread it keeps is still the saved one --------


def test_every_write_to_a_thread_moves_its_version_and_a_lease_does_not(store: Store):
    assert isinstance(store, VersionedStore)  # agents keep the threads they run on every store
    thread = make(store, "t1", texts=("one",))
    seen = [store.thread_version("t1")]

    def moved() -> ThreadVersion:
        now = store.thread_version("t1")
        assert now is not None and now.changes > seen[-1].changes, (seen, now)
        seen.append(now)
        return now

    assert seen[0] is not None and seen[0].messages == 1
    add(store, thread, Message("user", [TextPart("two")], T0 + timedelta(minutes=1)))
    assert moved().messages == 2
    thread.title = "renamed"
    store.save_thread(thread)
    moved()
    call = ToolCall("c1", "insert", {"row": 1})
    add_with_pending = Message("assistant", [call], T0 + timedelta(minutes=2))
    thread.messages.append(add_with_pending)
    store.append(thread, add_with_pending, pending=[PendingApproval("c1", "insert", {"row": 1})])
    assert moved().messages == 3
    store.update_calls("t1", ["c1"], "approved", expect={"pending"})
    moved()
    store.acquire_lease("t1", "here:1:a", 30)
    assert store.thread_version("t1") == seen[-1]  # who runs it is not a change of it
    store.release_lease("t1", "here:1:a", error="stopped")
    moved()
    assert store.thread_version("t1", user_id="someone") is None
    assert store.thread_version("never-saved") is None


def test_a_thread_deleted_and_made_again_has_a_version_it_never_had(store: Store):
    make(store, "t1", texts=("old",))
    old = store.thread_version("t1")
    store.delete("t1")
    assert store.thread_version("t1") is None
    make(store, "t1", texts=("new",))  # the same id, the same number of messages and writes
    new = store.thread_version("t1")
    assert new is not None and old is not None and new != old


# ---- schema versions -------------------------------------------------------------------------


def test_the_previous_schema_version_opens_and_is_upgraded(persistent_backend: Backend):
    backend = persistent_backend
    thread = Thread(id="old", agent="analyst", title="March", created_at=T0, updated_at=T0)
    thread.messages.append(Message("user", [TextPart("Find the Überweisung from March")], T0))
    store = backend.open_previous_version(thread)
    try:
        assert store.schema_version == len(_migrations(backend))  # type: ignore[attr-defined]
        assert ids(store.list()) == ["old"]
        assert dumped(store.load("old")) == dumped(thread)
        assert ids(store.search("überweisung")) == ["old"]
        add(store, thread, Message("user", [TextPart("and April")], T0 + timedelta(days=30)))
    finally:
        store.close()
    again = backend.open()
    loaded = again.load("old")
    assert loaded is not None and [m.text for m in loaded.messages][-1] == "and April"
    again.close()


def _migrations(backend: Backend) -> list:
    if backend.name == "sqlite":
        from loom_nb.sqlite import _schema as _sqlite_schema

        return _sqlite_schema.MIGRATIONS
    from loom_nb.postgres import _schema

    return _schema.MIGRATIONS


def test_a_closed_store_says_so(persistent_backend: Backend):
    store = persistent_backend.open()
    store.close()
    with pytest.raises(UserError, match="closed"):
        store.list()
