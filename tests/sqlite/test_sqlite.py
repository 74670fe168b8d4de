"""The SQLite store in one process: the contract, scoping, schema versions, faults, threads.

Restarts, kills and concurrent writers (real processes) are in test_sqlite_processes.py.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from loom_nb import (
    MemoryStore,
    Message,
    PendingApproval,
    ReplayModel,
    Reply,
    Store,
    TextPart,
    Thread,
    ThreadNotFound,
    ToolCall,
    ToolResult,
    Usage,
    UserError,
    define_agent,
    memory_store,
    tool,
)
from loom_nb._messages import new_thread_id
from loom_nb.sqlite import (
    NewerSchemaError,
    NotADatabaseError,
    SQLiteStore,
    StoreNotWritableError,
    sqlite_store,
)
from loom_nb.sqlite._schema import MIGRATIONS
from tests.stores._threads import T0, dumped, make

#: A frozen copy of the first schema version's DDL (migration m001), as shipped. A file made
#: with it is what an older loom_nb left on disk; the current code must open and upgrade it.
V1_DDL = """
CREATE TABLE loom_migrations (
    name TEXT PRIMARY KEY,
    applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE TABLE loom_threads (
    id TEXT PRIMARY KEY,
    agent TEXT NOT NULL,
    user_id TEXT,
    title TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    updated_us INTEGER NOT NULL,
    pending TEXT NOT NULL DEFAULT '[]',
    pending_count INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    message_count INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX loom_threads_owner ON loom_threads (user_id, agent);
CREATE TABLE loom_messages (
    thread_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    role TEXT NOT NULL,
    created_at TEXT NOT NULL,
    json TEXT NOT NULL,
    data TEXT,
    PRIMARY KEY (thread_id, seq)
) WITHOUT ROWID;
INSERT INTO loom_migrations (name) VALUES ('m001_threads_and_messages');
"""


@pytest.fixture
def store(tmp_path: Path):
    s = sqlite_store(tmp_path / "loom.db")
    yield s
    s.close()


# ---- the contract ----------------------------------------------------------------------------


def test_is_a_store_and_round_trips_a_thread(store: SQLiteStore):
    assert isinstance(store, Store)
    thread = make(store, "t1", texts=("about orders", "and tickets"))
    thread.title = "Orders"
    thread.pending = [PendingApproval("call_1", "insert_rows", {"rows": [{"id": 1}]}, {"id": [1]})]
    store.save_thread(thread)
    loaded = store.load("t1")
    assert loaded is not None
    assert dumped(loaded) == dumped(thread)
    assert [m.text for m in loaded.messages] == ["about orders", "and tickets"]
    assert loaded.pending[0].digest == thread.pending[0].digest
    assert loaded.status == "awaiting_approval"


def test_lists_newest_first_by_agent_and_by_page(store: SQLiteStore):
    old = make(store, "old", agent="a", at=T0)
    new = make(store, "new", agent="b", at=T0 + timedelta(hours=1))
    mid = make(store, "mid", agent="a", at=T0 + timedelta(minutes=30), texts=("x", "y", "z"))
    assert [t.id for t in store.list()] == ["new", "mid", "old"]
    assert [t.id for t in store.list(agent="a")] == ["mid", "old"]
    assert [t.id for t in store.list(limit=1, offset=1)] == ["mid"]
    assert [t.id for t in store.list(limit=2, offset=2)] == ["old"]
    info = store.list(agent="a")[0]
    assert (info.message_count, info.pending_count) == (3, 0)
    assert info.updated_at == mid.updated_at and info.created_at == mid.created_at
    # a new message moves a thread to the top
    old.updated_at = T0 + timedelta(hours=2)
    message = Message.user("again")
    old.messages.append(message)
    store.append(old, message)
    assert [t.id for t in store.list()] == ["old", "new", "mid"]
    assert new.id in {t.id for t in store.list()}


def test_timestamps_in_other_zones_sort_by_instant(store: SQLiteStore):
    paris = timezone(timedelta(hours=1))
    make(store, "utc", at=datetime(2025, 3, 1, 11, 30, tzinfo=timezone.utc))
    make(store, "paris", at=datetime(2025, 3, 1, 12, 0, tzinfo=paris))  # 11:00 UTC
    assert [t.id for t in store.list()] == ["utc", "paris"]
    assert store.load("paris").created_at.utcoffset() == timedelta(hours=1)


def test_search_finds_text_and_tool_results_case_insensitively(store: SQLiteStore):
    make(store, "orders", texts=("Which ORDERS are open?",))
    make(store, "umlaut", texts=("Straße in München",))
    quoted = make(
        store, "quoted", texts=('say "hi"\nthen % and _ literally',), at=T0 + timedelta(1)
    )
    result = Message(
        "tool", [ToolResult("c1", "query", "<data rows=3>Invoice INV-7</data>", {"x": 1})]
    )
    quoted.messages.append(result)
    store.append(quoted, result)
    assert [t.id for t in store.search("orders")] == ["orders"]
    assert [t.id for t in store.search("STRASSE")] == ["umlaut"]  # casefold, like memory_store
    assert [t.id for t in store.search("münchen")] == ["umlaut"]
    assert [t.id for t in store.search('say "hi"\nthen')] == ["quoted"]
    assert [t.id for t in store.search("% and _")] == ["quoted"]
    assert store.search("%") == store.search("% and _")  # no LIKE wildcards
    assert [t.id for t in store.search("inv-7")] == ["quoted"]
    assert store.search("kind") == []  # the JSON's keys are not text
    assert store.search("user") == []
    assert [t.id for t in store.search("o", limit=1)] == ["quoted"]


def test_delete_removes_the_thread_and_its_messages(store: SQLiteStore):
    make(store, "t1", texts=("one", "two"))
    make(store, "t2")
    assert store.delete("t1")
    assert store.load("t1") is None
    assert not store.delete("t1")
    assert [t.id for t in store.list()] == ["t2"]
    assert store.search("two") == []
    count = store._conn.execute("SELECT count(*) FROM loom_messages WHERE thread_id = 't1'")
    assert count.fetchone()[0] == 0


def test_append_to_an_unsaved_thread_fails_and_writes_nothing(store: SQLiteStore):
    ghost = Thread(id="ghost", agent="a")
    with pytest.raises(KeyError, match="never saved"):
        store.append(ghost, Message.user("lost"))
    assert store._conn.execute("SELECT count(*) FROM loom_messages").fetchone()[0] == 0


def test_appending_never_rewrites_the_thread(store: SQLiteStore):
    """Appending at message 500 changes as many rows as appending at message 1."""
    thread = make(store, "long", texts=())
    conn = store._conn
    changes = []
    for i in range(500):
        message = Message.assistant(f"message {i}")
        thread.messages.append(message)
        before = conn.total_changes
        store.append(thread, message)
        changes.append(conn.total_changes - before)
    # One INSERT of the message, one UPDATE of the thread record, and the search index's own
    # rows (a small segment, now and then a merge of a few): bounded, not growing.
    assert statistics.median(changes[:250]) == statistics.median(changes[250:])
    assert max(changes) <= 64
    loaded = store.load("long")
    assert [m.text for m in loaded.messages] == [f"message {i}" for i in range(500)]


def test_loaded_threads_are_copies(store: SQLiteStore):
    make(store, "t1")
    loaded = store.load("t1")
    loaded.messages.append(Message.user("not saved"))
    loaded.title = "changed"
    again = store.load("t1")
    assert len(again.messages) == 1 and again.title is None


def test_usage_model_and_every_part_kind_survive(store: SQLiteStore):
    thread = make(store, "t1", texts=())
    messages = [
        Message.user("go"),
        Message(
            "assistant",
            [
                TextPart("Let me look."),
                ToolCall("call_a", "query", {"table": "orders"}),
                ToolCall("call_b", "query", None, raw_arguments="{not json"),
            ],
            usage=Usage(120, 30, 1),
            model="test:replay",
        ),
        Message(
            "tool",
            [
                ToolResult("call_a", "query", "rows", {"rows": [1, 2], "__loom__": "not a tag"}),
                ToolResult("call_b", "query", '{"error": "bad"}', is_error=True),
                ToolResult("call_c", "insert", "done", [1, "two", None], approval="approved"),
            ],
        ),
    ]
    for m in messages:
        thread.messages.append(m)
        store.append(thread, m)
    loaded = store.load("t1")
    assert dumped(loaded) == dumped(thread)
    assert loaded.usage == Usage(120, 30, 1)
    assert loaded.messages[1].model == "test:replay"
    results = loaded.messages[2].tool_results
    assert results[0].data == {"rows": [1, 2], "__loom__": "not a tag"}
    assert results[1].data is None and results[1].is_error
    assert results[2].approval == "approved"


def test_a_loaded_tool_result_behaves_like_the_one_saved(store: SQLiteStore):
    thread = make(store, "t1", texts=())
    original = ToolResult("c1", "lookup", "found", {"total": 42.5})
    message = Message("tool", [original])
    thread.messages.append(message)
    store.append(thread, message)
    loaded = store.load("t1").messages[0].parts[0]
    assert isinstance(loaded, ToolResult)
    assert loaded == original and original == loaded
    assert repr(loaded) == repr(original)
    assert dataclasses.asdict(loaded) == dataclasses.asdict(original)
    changed = dataclasses.replace(loaded, content="other")
    assert changed.data == {"total": 42.5} and changed != original
    loaded.data = {"total": 0}
    assert loaded.data == {"total": 0}


def test_thread_ids_are_128_random_bits_url_safe():
    ids = {new_thread_id() for _ in range(2000)}
    assert len(ids) == 2000
    for thread_id in ids:
        assert re.fullmatch(r"[A-Za-z0-9_-]{22}", thread_id)
        assert len(base64.urlsafe_b64decode(thread_id + "==")) == 16
    # every bit position varies: no constant prefix, counter or timestamp
    bits = [int.from_bytes(base64.urlsafe_b64decode(i + "=="), "big") for i in ids]
    ones = [sum((b >> k) & 1 for b in bits) for k in range(128)]
    assert all(800 < n < 1200 for n in ones), ones


# ---- users -----------------------------------------------------------------------------------


def test_a_foreign_thread_reads_exactly_like_an_unknown_one(store: SQLiteStore):
    make(store, "ann-1", user="ann", texts=("ann's secret plan",))
    make(store, "open-1", user=None, texts=("no auth here",))
    for user in ("bob", None):
        assert store.load("ann-1", user_id=user) is None
        assert store.load("ann-1", user_id=user) == store.load("nope", user_id=user)
        assert not store.delete("ann-1", user_id=user)
        assert "ann-1" not in {t.id for t in store.list(user_id=user)}
        assert store.search("secret", user_id=user) == []
    assert store.load("open-1", user_id="ann") is None
    assert store.load("ann-1", user_id="ann") is not None
    assert [t.id for t in store.search("secret", user_id="ann")] == ["ann-1"]


def test_agents_with_auth_give_the_same_error_for_foreign_and_unknown_threads(tmp_path: Path):
    store = sqlite_store(tmp_path / "loom.db")
    agent = define_agent(
        name="analyst",
        model=ReplayModel(["Hello Ann."]),
        store=store,
        auth=lambda ctx: ctx.get("user"),
    )
    ann = agent.run_sync("hi", context={"user": "ann"})
    errors = []
    for thread_id in (ann.thread_id, new_thread_id()):
        with pytest.raises(ThreadNotFound, match=f"no thread '{thread_id}' for agent") as caught:
            agent.thread(thread_id, context={"user": "bob"})
        errors.append(str(caught.value).replace(thread_id, "<id>"))
    assert errors[0] == errors[1]
    with pytest.raises(ThreadNotFound, match=f"no thread '{ann.thread_id}' for agent"):
        agent.delete_thread(ann.thread_id, context={"user": "bob"})
    assert agent.threads(context={"user": "bob"}) == []
    assert [t.id for t in agent.threads(context={"user": "ann"})] == [ann.thread_id]
    assert agent.thread(ann.thread_id, context={"user": "ann"}).last_text == "Hello Ann."
    store.close()


# ---- the same answers as memory_store, for any sequence of calls -----------------------------

_ids = st.sampled_from(["t1", "t2", "t3", "t4"])
_users = st.sampled_from([None, "ann", "bob"])
_agents = st.sampled_from(["a", "b"])
_words = st.sampled_from(["Orders", "tickets", "ÉTÉ", "straße", "%", "_", "o"])
_ops = st.lists(
    st.one_of(
        st.tuples(st.just("save"), _ids, _agents, _users, st.integers(0, 3)),
        st.tuples(st.just("append"), _ids, _words, st.integers(0, 3)),
        st.tuples(st.just("delete"), _ids, _users),
        st.tuples(
            st.just("list"),
            st.one_of(st.none(), _agents),
            _users,
            st.integers(0, 3),
            st.integers(0, 2),
        ),
        st.tuples(
            st.just("search"), _words, st.one_of(st.none(), _agents), _users, st.integers(1, 3)
        ),
        st.tuples(st.just("load"), _ids, _users),
    ),
    max_size=30,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=_ops)
@example(
    ops=[("save", "t1", "a", None, 0), ("save", "t2", "a", None, 0), ("list", None, None, 1, 1)]
)
def test_answers_like_memory_store(tmp_path: Path, ops: list[tuple[object, ...]]):
    path = tmp_path / f"{new_thread_id()}.db"
    sql = sqlite_store(path)
    mem = memory_store()
    threads: dict[str, Thread] = {}
    try:
        for op in ops:
            kind = op[0]
            if kind == "save":
                _, tid, agent, user, minute = op
                thread = Thread(
                    id=tid,
                    agent=agent,
                    user_id=user,
                    created_at=T0,
                    updated_at=T0 + timedelta(minutes=minute),
                )
                if tid in threads:  # keep the messages the stores already have
                    thread.messages = threads[tid].messages
                threads[tid] = thread
                sql.save_thread(thread)
                mem.save_thread(thread)
            elif kind == "append":
                _, tid, word, minute = op
                if tid not in threads:
                    continue
                thread = threads[tid]
                thread.updated_at = T0 + timedelta(minutes=minute)
                message = Message.user(f"say {word}")
                sql.append(thread, message)
                mem.append(thread, message)
            elif kind == "delete":
                _, tid, user = op
                deleted = sql.delete(tid, user_id=user)
                assert deleted == mem.delete(tid, user_id=user)
                if deleted:
                    threads.pop(tid)
            elif kind == "list":
                _, agent, user, limit, offset = op
                got = sql.list(agent=agent, user_id=user, limit=limit, offset=offset)
                want = mem.list(agent=agent, user_id=user, limit=limit, offset=offset)
                assert _infos(got) == _infos(want)
            elif kind == "search":
                _, word, agent, user, limit = op
                got = sql.search(word, agent=agent, user_id=user, limit=limit)
                want = mem.search(word, agent=agent, user_id=user, limit=limit)
                assert _infos(got) == _infos(want)
            else:
                _, tid, user = op
                assert dumped(sql.load(tid, user_id=user)) == dumped(mem.load(tid, user_id=user))
    finally:
        sql.close()


def _infos(infos: list) -> list[tuple]:
    return [
        (
            i.id,
            i.agent,
            i.user_id,
            i.title,
            i.created_at,
            i.updated_at,
            i.message_count,
            i.pending_count,
        )
        for i in infos
    ]


# ---- schema versions -------------------------------------------------------------------------


def test_a_version_1_file_opens_and_is_upgraded(tmp_path: Path):
    path = tmp_path / "v1.db"
    conn = sqlite3.connect(path)
    conn.executescript(V1_DDL)
    old = Message("user", [TextPart("Find the Überweisung from March")], created_at=T0)
    conn.execute(
        "INSERT INTO loom_threads (id, agent, user_id, title, created_at, updated_at, updated_us,"
        " message_count) VALUES ('old', 'analyst', NULL, 'March', ?, ?, 1, 1)",
        (T0.isoformat(), T0.isoformat()),
    )
    conn.execute(
        "INSERT INTO loom_messages VALUES ('old', 0, 'user', ?, ?, NULL)",
        (T0.isoformat(), json.dumps(old.to_dict())),
    )
    conn.commit()
    conn.close()

    store = sqlite_store(path)
    assert store.schema_version == len(MIGRATIONS)
    assert [t.id for t in store.list()] == ["old"]
    loaded = store.load("old")
    assert loaded.messages[0].text == "Find the Überweisung from March"
    assert [t.id for t in store.search("überweisung")] == ["old"]  # the new column, backfilled
    thread = loaded
    more = Message.user("and April")
    thread.messages.append(more)
    store.append(thread, more)
    store.close()
    again = sqlite_store(path)
    assert [m.text for m in again.load("old").messages][-1] == "and April"
    names = [r[0] for r in again._conn.execute("SELECT name FROM loom_migrations ORDER BY rowid")]
    assert names == [m.__name__ for m in MIGRATIONS]
    again.close()


def test_a_version_2_file_with_a_waiting_call_upgrades_and_the_call_goes_on(tmp_path: Path):
    from loom_nb.sqlite import _schema as schema

    path = tmp_path / "v2.db"
    conn = sqlite3.connect(path, isolation_level=None)
    schema.applied(conn)
    for migration in schema.MIGRATIONS[:2]:  # m001, m002: pending calls kept "decision"
        migration(conn)
        conn.execute("INSERT INTO loom_migrations (name) VALUES (?)", (migration.__name__,))
    pending = [
        {
            "call_id": "c1",
            "tool": "insert",
            "arguments": {"n": 1},
            "digest": "d1",
            "decision": None,
        },
        {
            "call_id": "c2",
            "tool": "insert",
            "arguments": {"n": 2},
            "digest": "d2",
            "decision": True,
        },
    ]
    conn.execute(
        "INSERT INTO loom_threads (id, agent, created_at, updated_at, updated_us, pending, "
        "pending_count) VALUES ('old', 'a', ?, ?, 1, ?, 2)",
        (T0.isoformat(), T0.isoformat(), json.dumps(pending)),
    )
    conn.close()

    store = sqlite_store(path)
    assert store.schema_version == len(MIGRATIONS)
    thread = store.load("old")
    assert [(p.call_id, p.state, p.decision) for p in thread.pending] == [
        ("c1", "pending", None),
        ("c2", "approved", True),  # decided earlier, never run
    ]
    assert thread.lease is None
    assert store.acquire_lease("old", "h:1:a", 30).holder == "h:1:a"
    store.update_calls("old", ["c1"], "rejected", expect={"pending"})
    assert [p.state for p in store.load("old").pending] == ["rejected", "approved"]
    store.close()


def test_a_file_from_a_newer_version_is_refused_and_left_alone(tmp_path: Path):
    path = tmp_path / "new.db"
    store = sqlite_store(path)
    make(store, "t1")
    store.close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO loom_migrations (name) VALUES ('m003_something_new')")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(NewerSchemaError, match="was written by a newer loom_nb") as caught:
        sqlite_store(path)
    message = str(caught.value)
    assert "newer loom_nb" in message and "m003_something_new" in message
    assert "pip install -U loom-nb" in message
    assert isinstance(caught.value, UserError)
    assert path.read_bytes() == before


# ---- faults ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        b"this is my notes file, not a database\n" * 40,
        os.urandom(8192),
        b"SQLite format 3\x00" + b"\xff" * 200,
    ],
    ids=["text", "random", "bad-header"],
)
def test_a_file_that_is_not_sqlite_is_refused_and_left_alone(tmp_path: Path, content: bytes):
    path = tmp_path / "notes.db"
    path.write_bytes(content)
    with pytest.raises(NotADatabaseError, match="is not a SQLite database") as caught:
        sqlite_store(path)
    message = str(caught.value)
    assert str(path) in message and "not a SQLite database" in message
    assert "sqlite_store(path=...)" in message
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]


def test_a_folder_that_cannot_be_created_is_a_clear_error(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("I am a file")
    with pytest.raises(StoreNotWritableError, match="cannot create the folder") as caught:
        sqlite_store(blocker / "sub" / "loom.db")
    assert "cannot create the folder" in str(caught.value)
    assert "sqlite_store(path=...)" in str(caught.value)


def test_a_folder_as_the_path_is_a_clear_error(tmp_path: Path):
    with pytest.raises(StoreNotWritableError, match="is a folder"):
        sqlite_store(tmp_path)


def test_the_default_path_is_dot_loom_and_its_folder_is_created(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = sqlite_store()
    make(store, "t1")
    store.close()
    assert (tmp_path / ".loom" / "loom.db").is_file()
    again = sqlite_store()
    assert [t.id for t in again.list()] == ["t1"]
    again.close()


_READ_ONLY_CHILD = """
import os, sys
from loom_nb.sqlite import sqlite_store, StoreNotWritableError
if os.getuid() == 0:  # root writes anywhere: drop to nobody, as a user's kernel would run
    os.setgid(65534); os.setuid(65534)
for path in sys.argv[1:]:
    try:
        sqlite_store(path)
    except StoreNotWritableError as exc:
        print("refused:", exc)
    else:
        print("opened:", path)
"""


def test_a_path_that_cannot_be_written_is_a_clear_error(tmp_path: Path):
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="loom-ro-"))
    try:
        existing = folder / "existing.db"
        seed = sqlite_store(existing)
        make(seed, "t1")
        seed.close()
        for p in folder.iterdir():
            p.chmod(0o444)
        folder.chmod(0o555)  # nobody may create files here (nor -wal / -shm files)
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                _READ_ONLY_CHILD,
                str(folder / "new.db"),
                str(folder / "sub" / "x.db"),
                str(existing),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert len(lines) == 3 and all(line.startswith("refused:") for line in lines), out.stdout
        assert "cannot write the thread store" in lines[0] and "writable" in lines[0]
        assert "cannot create the folder" in lines[1]
        assert "cannot write the thread store" in lines[2]
    finally:
        folder.chmod(0o755)
        for p in folder.iterdir():
            p.chmod(0o644)
            p.unlink()
        folder.rmdir()


def test_a_closed_store_says_so(tmp_path: Path):
    store = sqlite_store(tmp_path / "loom.db")
    store.close()
    store.close()  # twice is fine
    with pytest.raises(UserError, match="closed"):
        store.list()


# ---- your own connection ---------------------------------------------------------------------


def test_a_connection_you_pass_is_used_and_left_open(tmp_path: Path):
    conn = sqlite3.connect(tmp_path / "app.db", check_same_thread=False)
    conn.execute("CREATE TABLE threads (mine TEXT)")  # the user's own table of that name
    conn.commit()
    store = sqlite_store(database=conn)
    make(store, "t1", texts=("kept in your file",))
    store.close()
    assert conn.execute("SELECT count(*) FROM loom_messages").fetchone()[0] == 1
    assert conn.execute("SELECT count(*) FROM threads").fetchone()[0] == 0
    again = sqlite_store(database=conn)
    assert again.load("t1").messages[0].text == "kept in your file"
    conn.close()


def test_a_connection_bound_to_one_thread_is_refused_with_the_fix(tmp_path: Path):
    conn = sqlite3.connect(tmp_path / "app.db")
    with pytest.raises(UserError, match="check_same_thread=False"):
        sqlite_store(database=conn)
    with pytest.raises(UserError, match=r"sqlite3\.Connection"):
        sqlite_store(database=str(tmp_path / "app.db"))  # type: ignore[arg-type]
    conn.close()


# ---- threads of one process ------------------------------------------------------------------


def test_the_notebook_thread_reads_while_the_agent_thread_writes(tmp_path: Path):
    store = sqlite_store(tmp_path / "loom.db")
    errors: list[BaseException] = []
    done = threading.Event()

    def writer(n: int) -> None:
        try:
            for t in range(5):
                thread = make(store, f"w{n}-{t}", texts=())
                for i in range(40):
                    m = Message.assistant(f"{n}/{t}/{i}")
                    thread.messages.append(m)
                    store.append(thread, m)
        except BaseException as exc:
            errors.append(exc)

    writers = [threading.Thread(target=writer, args=(n,)) for n in range(3)]
    for w in writers:
        w.start()

    def reader() -> None:
        try:
            while not done.is_set():
                for info in store.list(limit=100):
                    loaded = store.load(info.id)
                    assert loaded is not None
                    texts = [m.text for m in loaded.messages]
                    assert texts == [
                        f"{info.id[1:].replace('-', '/')}/{i}" for i in range(len(texts))
                    ]
                store.search("7")
        except BaseException as exc:
            errors.append(exc)

    readers = [threading.Thread(target=reader) for _ in range(2)]
    for r in readers:
        r.start()
    for w in writers:
        w.join()
    done.set()
    for r in readers:
        r.join()
    assert errors == []
    assert sorted(i.message_count for i in store.list(limit=100)) == [40] * 15
    store.close()


def test_an_agent_run_is_saved_message_by_message(tmp_path: Path):
    @tool
    def total(table: str) -> dict:
        """Sum a table."""
        return {"table": table, "total": 7}

    store = sqlite_store(tmp_path / "loom.db")
    model = ReplayModel([Reply(tool_calls=[("total", {"table": "orders"})]), "The total is 7."])
    agent = define_agent(name="analyst", model=model, tools=[total], store=store)
    result = agent.run_sync("What is the total?")
    loaded = store.load(result.thread_id)
    assert dumped(loaded) == dumped(result.thread)
    assert [m.role for m in loaded.messages] == ["user", "assistant", "tool", "assistant"]
    assert loaded.title == "What is the total?"
    assert loaded.messages[2].tool_results[0].data == {"table": "orders", "total": 7}
    assert isinstance(agent.store, MemoryStore) is False
    store.close()
