"""The SQLite store's search index and query plans: the same answers as a scan of every
message (``memory_store``), on indexes that fit each query."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loom_nb import Message, TextPart, Thread, ToolResult, memory_store
from loom_nb._messages import new_thread_id
from loom_nb.sqlite import SQLiteStore, sqlite_store
from loom_nb.sqlite import _schema as schema
from loom_nb.sqlite._schema import MIGRATIONS

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=timezone.utc)

# Letters whose casefold differs from lower() or changes length, accents, quotes, FTS5 query
# syntax, SQL wildcards, whitespace.
_ALPHABET = "aAbBoOsSßẞİıΣσςﬁéÉe\u0301 \n\t\"'*%_-:()^"


def _thread_of(store: object, thread_id: str, texts: list[str], at: datetime) -> Thread:
    thread = Thread(id=thread_id, agent="a", created_at=at, updated_at=at)
    store.save_thread(thread)  # type: ignore[attr-defined]
    for i, text in enumerate(texts):
        if i % 3 == 2:  # tool result contents are searched too, with the text
            part: object = ToolResult(f"c{i}", "query", text)
            message = Message("tool", [part], created_at=at)  # type: ignore[list-item]
        else:
            message = Message("user", [TextPart(text), TextPart(text[::-1])], created_at=at)
        thread.messages.append(message)
        store.append(thread, message)  # type: ignore[attr-defined]
    return thread


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    threads=st.lists(
        st.lists(st.text(_ALPHABET, max_size=12), min_size=1, max_size=4), min_size=1, max_size=4
    ),
    needles=st.lists(st.text(_ALPHABET, max_size=6), max_size=4),
    cuts=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 12)), max_size=4),
)
def test_search_answers_like_a_scan_of_every_message(
    tmp_path: Path, threads: list[list[str]], needles: list[str], cuts: list[tuple[int, int, int]]
):
    sql = sqlite_store(tmp_path / f"{new_thread_id()}.db")
    mem = memory_store()
    try:
        for n, texts in enumerate(threads):
            at = T0 + timedelta(minutes=n)
            _thread_of(sql, f"t{n}", texts, at)
            _thread_of(mem, f"t{n}", texts, at)
        # pieces of the saved texts, which are found, besides texts that may not be
        for t, m, start in cuts:
            texts = threads[t % len(threads)]
            text = texts[m % len(texts)]
            needles.append(text[start : start + 5])
        for needle in needles:
            for candidate in (needle, needle.upper(), needle.casefold()):
                got = [i.id for i in sql.search(candidate, limit=10)]
                assert got == [i.id for i in mem.search(candidate, limit=10)], candidate
    finally:
        sql.close()


def test_texts_shorter_than_three_characters_are_found_too(tmp_path: Path):
    store = sqlite_store(tmp_path / "loom.db")
    _thread_of(store, "short", ["x", "ok?"], T0)
    assert [t.id for t in store.search("K?")] == ["short"]
    assert [t.id for t in store.search("x")] == ["short"]
    assert [t.id for t in store.search("")] == ["short"]  # like "" in text
    assert store.search("q") == []
    store.close()


def test_a_deleted_thread_leaves_nothing_in_the_index(store_path: Path):
    store = sqlite_store(store_path)
    _thread_of(store, "gone", ["Quarterly numbers", "quarterly review"], T0)
    _thread_of(store, "kept", ["Quarterly plans"], T0 + timedelta(minutes=1))
    assert store.delete("gone")
    ids = store._conn.execute(
        'SELECT rowid FROM loom_search WHERE loom_search MATCH \'"qua" AND "rte"\''
    ).fetchall()
    kept = store._conn.execute("SELECT id FROM loom_messages").fetchall()
    assert ids == kept
    assert [t.id for t in store.search("quarterly")] == ["kept"]
    assert store._conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    store.close()


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "loom.db"


def test_without_the_trigram_tokenizer_search_checks_every_message(
    store_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(schema, "search_index_available", lambda conn: False)
    store = sqlite_store(store_path)
    assert not store._conn.execute(
        "SELECT 1 FROM sqlite_master WHERE name = 'loom_search'"
    ).fetchall()
    _thread_of(store, "t1", ["Straße in München"], T0)
    assert [t.id for t in store.search("STRASSE IN")] == ["t1"]
    assert store.delete("t1")
    store.close()


#: A file as loom_nb wrote it with two migrations: messages in a WITHOUT ROWID table with a
#: casefolded copy of their text.
V2_DDL = """
CREATE TABLE loom_migrations (name TEXT PRIMARY KEY,
    applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP);
CREATE TABLE loom_threads (id TEXT PRIMARY KEY, agent TEXT NOT NULL, user_id TEXT, title TEXT,
    created_at TEXT NOT NULL, updated_at TEXT NOT NULL, updated_us INTEGER NOT NULL,
    pending TEXT NOT NULL DEFAULT '[]', pending_count INTEGER NOT NULL DEFAULT 0, error TEXT,
    message_count INTEGER NOT NULL DEFAULT 0);
CREATE INDEX loom_threads_owner ON loom_threads (user_id, agent);
CREATE TABLE loom_messages (thread_id TEXT NOT NULL, seq INTEGER NOT NULL, role TEXT NOT NULL,
    created_at TEXT NOT NULL, json TEXT NOT NULL, data TEXT, search TEXT,
    PRIMARY KEY (thread_id, seq)) WITHOUT ROWID;
INSERT INTO loom_migrations (name) VALUES ('m001_threads_and_messages'), ('m002_search_text');
"""


def test_a_version_2_file_gets_the_index_and_keeps_every_message(store_path: Path):
    conn = sqlite3.connect(store_path)
    conn.executescript(V2_DDL)
    texts = {"old-1": ["Invoice for ACME", "paid in March"], "old-2": ["Überweisung"]}
    for n, (thread_id, items) in enumerate(texts.items()):
        conn.execute(
            "INSERT INTO loom_threads (id, agent, created_at, updated_at, updated_us, "
            "message_count) VALUES (?, 'a', ?, ?, ?, ?)",
            (thread_id, T0.isoformat(), T0.isoformat(), n, len(items)),
        )
        for seq, text in enumerate(items):
            message = Message("user", [TextPart(text)], created_at=T0)
            conn.execute(
                "INSERT INTO loom_messages VALUES (?, ?, 'user', ?, ?, NULL, ?)",
                (thread_id, seq, T0.isoformat(), json.dumps(message.to_dict()), text.casefold()),
            )
    conn.commit()
    conn.close()

    store = sqlite_store(store_path)
    assert store.schema_version == len(MIGRATIONS)
    columns = [r[1] for r in store._conn.execute("PRAGMA table_info(loom_messages)")]
    assert "search" not in columns  # the copy is gone; the index has no copy either
    assert [t.id for t in store.search("acme")] == ["old-1"]
    assert [t.id for t in store.search("ÜBERWEISUNG")] == ["old-2"]
    assert [m.text for m in store.load("old-1").messages] == texts["old-1"]
    thread = store.load("old-2")
    more = Message.user("and the reminder")
    thread.messages.append(more)
    store.append(thread, more)
    assert [t.id for t in store.search("reminder")] == ["old-2"]
    assert [m.text for m in store.load("old-2").messages] == ["Überweisung", "and the reminder"]
    store.close()


# ---- query plans -----------------------------------------------------------------------------


def _plan(store: SQLiteStore, sql: str, params: list[object]) -> list[str]:
    return [row[3] for row in store._conn.execute("EXPLAIN QUERY PLAN " + sql, params)]


def _statements(store: SQLiteStore, call: object) -> list[str]:
    seen: list[str] = []
    store._conn.set_trace_callback(seen.append)
    try:
        call()  # type: ignore[operator]
    finally:
        store._conn.set_trace_callback(None)
    return [s for s in seen if s.lstrip().upper().startswith(("SELECT", "UPDATE", "WITH"))]


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.list(),
        lambda s: s.list(agent="a", limit=5, offset=2),
        lambda s: s.list(agent="a", user_id="ann"),
        lambda s: s.search("quarterly"),
        lambda s: s.search("qu", agent="a"),
        lambda s: s.load("t1"),
        lambda s: s.append(s.load("t1"), Message.user("more")),
        lambda s: s.thread_version("t1"),
    ],
    ids=["list", "list-agent", "list-user", "search", "search-short", "load", "append", "version"],
)
def test_listing_search_loading_and_appending_use_indexes(store_path: Path, call: object):
    store = sqlite_store(store_path)
    for n in range(3):
        _thread_of(store, f"t{n + 1}", ["Quarterly numbers"], T0 + timedelta(minutes=n))
    statements = _statements(store, lambda: call(store))  # type: ignore[operator]
    assert statements
    for sql in statements:
        plan = _plan(store, sql, [None] * sql.count("?"))
        steps = " | ".join(plan)
        # a full scan of a table, or a sort of the rows, would grow with the file
        assert not any(p.startswith(("SCAN loom_threads", "SCAN loom_messages")) for p in plan), (
            sql,
            steps,
        )
        assert "TEMP B-TREE" not in steps, (sql, steps)
    store.close()


def test_a_file_from_before_the_stored_text_finds_its_old_messages(store_path: Path):
    # A file as the previous version wrote it: every migration but the stored search text,
    # messages with their trigram index rows only.
    conn = sqlite3.connect(store_path, isolation_level=None)
    schema.applied(conn)
    previous = [m for m in MIGRATIONS if m is not schema.m008_stored_search_text]
    for migration in previous:
        migration(conn)
        conn.execute("INSERT INTO loom_migrations (name) VALUES (?)", (migration.__name__,))
    texts = {"old-1": ["Invoice #7 for ACME", "ok"], "old-2": ["Überweisung", "x"]}
    for n, (thread_id, items) in enumerate(texts.items()):
        conn.execute(
            "INSERT INTO loom_threads (id, agent, created_at, updated_at, updated_us, "
            "message_count) VALUES (?, 'a', ?, ?, ?, ?)",
            (thread_id, T0.isoformat(), T0.isoformat(), n, len(items)),
        )
        for seq, text in enumerate(items):
            message = Message("user", [TextPart(text)], created_at=T0)
            row = conn.execute(
                "INSERT INTO loom_messages (thread_id, seq, json) VALUES (?, ?, ?)",
                (thread_id, seq, json.dumps(message.to_dict())),
            ).lastrowid
            conn.execute(
                "INSERT INTO loom_search (rowid, text) VALUES (?, ?)", (row, text.casefold())
            )
    conn.close()

    store = sqlite_store(store_path)
    assert store.schema_version == len(MIGRATIONS)
    assert [t.id for t in store.search("acme")] == ["old-1"]  # through the trigram index
    assert [t.id for t in store.search("#7")] == ["old-1"]  # short: the stored text
    assert [t.id for t in store.search("OK")] == ["old-1"]
    assert [t.id for t in store.search("X")] == ["old-2"]
    assert [t.id for t in store.search("ÜBERWEISUNG")] == ["old-2"]
    assert store.delete("old-1")  # its index rows go with the stored text
    assert store.search("acme") == [] and store.search("ok") == []
    assert store._conn.execute("SELECT count(*) FROM loom_search_text").fetchone() == (2,)
    assert store._conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    store.close()


def test_no_search_parses_a_message(store_path: Path, monkeypatch: pytest.MonkeyPatch):
    store = sqlite_store(store_path)
    _thread_of(store, "t1", ["Quarterly numbers", "ok"], T0)
    _thread_of(store, "t2", ["quarterly plans"], T0 + timedelta(minutes=1))

    def refuse(*args: object, **kwargs: object) -> object:
        raise AssertionError("search parsed a message's JSON")

    monkeypatch.setattr(json, "loads", refuse)
    assert [t.id for t in store.search("QUARTERLY")] == ["t2", "t1"]
    assert [t.id for t in store.search("k")] == ["t1"]
    assert [t.id for t in store.search("ok numbers")] == []
    store.close()
