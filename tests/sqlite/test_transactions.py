"""How many durable transactions a run costs on a real SQLite file (WAL, ``synchronous =
FULL``: each write transaction is one fsync). The statements are counted as SQLite runs them
(``set_trace_callback`` on the connection the store is given): every write must be inside a
``BEGIN IMMEDIATE`` ... ``COMMIT``, and those are counted."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from loom_nb import ReplayModel, Reply, define_agent, tool
from loom_nb.sqlite import SQLiteStore, sqlite_store
from tests.stores._threads import writer


def counted(path: Path) -> tuple[SQLiteStore, list[str]]:
    """A store on ``path`` as a user would open one with their own connection, and the list
    the statements it runs go into."""
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    store = sqlite_store(database=conn)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    return store, statements


def write_transactions(statements: list[str]) -> list[list[str]]:
    """The committed write transactions among ``statements``, each as its writes; a write
    outside one fails the test (it would be a transaction of its own)."""
    found: list[list[str]] = []
    current: list[str] | None = None
    for statement in statements:
        head = statement.split(None, 1)[0].upper()
        if statement.strip().upper() == "BEGIN IMMEDIATE":
            current = []
        elif head == "COMMIT" and current is not None:
            found.append(current)
            current = None
        elif head == "ROLLBACK":
            current = None
        elif head in ("INSERT", "UPDATE", "DELETE", "REPLACE"):
            assert current is not None, f"a write outside a write transaction: {statement}"
            current.append(" ".join(statement.split()))
    return found


@tool
def lookup(key: str) -> str:
    "Look a key up."
    return "found " + key


def test_a_new_thread_run_with_one_tool_call_is_four_durable_transactions(tmp_path: Path):
    store, statements = counted(tmp_path / "loom.db")
    model = ReplayModel([Reply("", [("lookup", {"key": "k"})]), "It is k."])
    agent = define_agent(name="a", model=model, tools=[lookup], store=store)
    result = agent.run_sync("look k up")
    assert [m.role for m in result.thread.messages] == ["user", "assistant", "tool", "assistant"]
    writes = write_transactions(statements)
    assert len(writes) <= 4, writes
    first, *_, last = writes
    # the thread is made held, with its prompt; the answer frees it
    assert any(w.startswith("INSERT INTO loom_threads") and "lease_holder" in w for w in first)
    assert any("INSERT INTO loom_messages" in w for w in first)
    assert any("lease_holder = NULL" in w for w in last)
    assert any("INSERT INTO loom_messages" in w for w in last)
    # what a user sees: every message saved, and the thread free for the next kernel
    other = sqlite_store(tmp_path / "loom.db")
    saved = other.load(result.thread_id)
    assert saved is not None and saved.lease is None and len(saved.messages) == 4
    again = define_agent(name="a", model=ReplayModel(["Yes."]), tools=[lookup], store=other)
    assert again.run_sync("still k?", thread_id=result.thread_id).status == "complete"
    other.close()
    store.close()


def test_a_run_on_a_saved_thread_frees_its_lease_with_its_answer(tmp_path: Path):
    store, statements = counted(tmp_path / "loom.db")
    model = ReplayModel(["First.", Reply("", [("lookup", {"key": "k"})]), "It is k."])
    agent = define_agent(name="a", model=model, tools=[lookup], store=store)
    first = agent.run_sync("hello")
    statements.clear()
    agent.run_sync("look k up", thread_id=first.thread_id)
    # the lease taken, then the prompt, the call, its result, and the answer with the free
    assert len(write_transactions(statements)) == 5
    saved = store.load(first.thread_id)
    assert saved is not None and saved.lease is None and len(saved.messages) == 6
    store.close()


def test_a_new_thread_that_stops_for_approval_is_three_durable_transactions(tmp_path: Path):
    store, statements = counted(tmp_path / "loom.db")
    model = ReplayModel([Reply("", [("write_note", {"text": "x"})])])
    agent = define_agent(name="a", model=model, tools=[writer([])], store=store)
    stopped = agent.run_sync("note x")
    assert stopped.status == "awaiting_approval"
    # made held with its prompt; the turn with its card; the lease freed
    assert len(write_transactions(statements)) == 3
    saved = store.load(stopped.thread_id)
    assert saved is not None and saved.lease is None and saved.pending[0].tool == "write_note"
    store.close()
