"""The trials of a store that several processes write, the same for every store that
outlives a process.

- Kernels appending at once (``WRITER``, started on a barrier by ``write_at_once``), to a
  shared thread and each to its own: every message is kept, each kernel's in order.
- Kernels killed mid-append: children (``APPENDER``) append numbered messages and say so after
  each commit, are killed mid-stream, and a new store must hold every message a child
  reported, in order, with no gap."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from loom_nb import ReplayModel, Reply, Store, Thread, Tool, define_agent, tool

#: The repository, where a child's script imports ``tests`` from (after its own path, so it
#: imports the same loom_nb as this process).
_ROOT = str(Path(__file__).resolve().parents[2])

#: The first lines of a child process's script: this module's helpers, importable.
CHILD = f"""
import sys
sys.path.append({_ROOT!r})
from tests.stores._processes import open_target, ticket_writer
"""

#: Opens, in a child process's script, the store its first argument names (``open_target``).
OPEN_STORE = CHILD + "store = open_target(sys.argv[1])\n"

#: A kernel appending ``"<name> <i>"`` for i < count to thread ``shared`` and to its own
#: ``own-<name>``; arguments: the store (as for ``OPEN_STORE``), name, the start file, count.
#: It says ``ready`` once imported, waits for the start file, then opens the store (so that
#: kernels given a new SQLite file create and migrate it at once), and ends saying ``ok``.
WRITER = (
    CHILD
    + """
import os, time, traceback
from loom_nb import Message, Thread

name, go, count = sys.argv[2], sys.argv[3], int(sys.argv[4])
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.001)
try:
    store = open_target(sys.argv[1])
    shared, mine = Thread(id="shared", agent="a"), Thread(id=f"own-{name}", agent="a")
    store.save_thread(mine)
    if store.load("shared") is None:
        store.save_thread(shared)
    for i in range(count):
        for thread in (shared, mine):
            store.append(thread, Message.user(f"{name} {i}"))
        if i % 10 == 0:
            store.list()
            store.search(name)
    store.close()
    print("ok")
except Exception:
    traceback.print_exc()
    print("error")
"""
)


def write_at_once(store: str, names: list[str], count: int, folder: Path) -> None:
    """One ``WRITER`` kernel per name on ``store``, started together once every one of them
    says it is ready; each must end well, and none may meet "database is locked"."""
    go = folder / "go"
    children = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, store, name, str(go), str(count)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in names
    ]
    for child in children:  # the start barrier: each is imported and waiting
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready", child.communicate()[1]
    go.touch()
    for child in children:
        out, err = child.communicate(timeout=300)
        assert out.strip() == "ok", err
        assert "locked" not in err


#: A kernel appending numbered messages to one new thread after another until it is killed,
#: writing ``<thread id> <index>`` after each append it committed; arguments: the store (as
#: for ``OPEN_STORE``) and the run's name. Every fourth message is a tool result with a
#: payload, the others an assistant's text; each starts with ``<run>/<n>/<index>``.
APPENDER = (
    OPEN_STORE
    + """
from loom_nb import Message, Thread, ToolResult

run, n = sys.argv[2], 0
while True:  # until killed
    thread = Thread(id=f"{run}-{n}", agent="a")
    store.save_thread(thread)
    for i in range(30):
        if i % 4 == 3:
            data = {"rows": list(range(200))}
            m = Message("tool", [ToolResult(f"c{i}", "q", f"{run}/{n}/{i}", data)])
        else:
            m = Message.assistant(f"{run}/{n}/{i} " + "lorem ipsum " * 25)
        thread.messages.append(m)
        store.append(thread, m)
        sys.stdout.write(f"{thread.id} {i}\\n")
        sys.stdout.flush()
    n += 1
"""
)


def kill_while_appending(
    store: str, runs: int, rng: random.Random, most_appends: int, most_pause: float
) -> dict[str, int]:
    """Runs an ``APPENDER`` on ``store`` ``runs`` times, each killed after 1 to
    ``most_appends`` lines and a pause of up to ``most_pause`` seconds. The last index each
    thread was reported to reach."""
    reported: dict[str, int] = {}

    def note(line: str) -> None:
        thread_id, seq = line.split()
        reported[thread_id] = max(reported.get(thread_id, -1), int(seq))

    for run in range(runs):
        child = subprocess.Popen(
            [sys.executable, "-c", APPENDER, store, f"r{run}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        for _ in range(rng.randint(1, most_appends)):  # let it commit some, then kill it
            line = child.stdout.readline()
            assert line, child.stderr.read() if child.stderr else ""
            note(line)
        time.sleep(rng.random() * most_pause)
        child.send_signal(signal.SIGKILL)
        rest, _ = child.communicate()
        for line in rest.splitlines():  # appends it reported before dying
            note(line)
        assert child.returncode == -signal.SIGKILL
    return reported


def assert_reported_appends_kept(store: Store, reported: dict[str, int]) -> None:
    """Every message a child reported is in its thread, in order, with no gap; a message's
    first word (or its tool result) is ``<run>/<n>/<index>``."""
    infos = {i.id: i for i in store.list(limit=10_000)}
    for thread_id, last in reported.items():
        thread = store.load(thread_id)
        assert thread is not None, thread_id
        run, n = thread_id.split("-")
        texts = [
            m.text.split(" ")[0] if m.role == "assistant" else m.tool_results[0].content
            for m in thread.messages
        ]
        assert len(texts) >= last + 1  # nothing that completed is lost
        assert texts == [f"{run}/{n}/{i}" for i in range(len(texts))]  # in order, no gaps
        assert infos[thread_id].message_count == len(thread.messages)  # record and rows agree


def assert_concurrent_appends_kept(store: Store, names: list[str], count: int) -> None:
    """Kernels ``names`` each appended ``"<name> <i>"`` for i < ``count`` to thread
    ``shared`` and to its own ``own-<name>``: all are kept, each kernel's in order."""
    shared = store.load("shared")
    assert shared is not None
    texts = [m.text for m in shared.messages]
    assert len(texts) == len(names) * count
    for name in names:
        expected = [f"{name} {i}" for i in range(count)]
        assert [t for t in texts if t.split()[0] == name] == expected  # each kernel's in order
        own = store.load(f"own-{name}")
        assert own is not None and [m.text for m in own.messages] == expected
    counts = {i.id: i.message_count for i in store.list()}
    assert counts == {"shared": len(names) * count, **{f"own-{n}": count for n in names}}


def open_target(target: str) -> Store:
    """The store a child opens from its first argument (see ``OPEN_STORE``)."""
    if target.startswith("postgresql"):
        from loom_nb.postgres import postgres_store

        dsn, schema = target.split("#")
        return postgres_store(dsn, schema=schema)
    from loom_nb.sqlite import sqlite_store

    return sqlite_store(target)


def saved_thread(target: str, thread_id: str) -> Thread | None:
    """Thread ``thread_id`` as a new kernel reads it from ``target`` (see ``open_target``)."""
    store = open_target(target)
    try:
        return store.load(thread_id)
    finally:
        store.close()


def ticket_writer(side: str | Path, pause: float = 0.0) -> Tool:
    """The write the trials approve, ``write_ticket(key)``, in this process or a child's: it
    adds the line ``effect <key>`` to the file ``side`` (so a test counts how often it ran,
    whichever process ran it), says ``writing`` on stdout, then takes ``pause`` seconds."""

    @tool(needs_approval=True)
    def write_ticket(key: str) -> str:
        "File a ticket (the write)."
        with open(side, "a") as f:  # O_APPEND: whole lines, whichever process writes
            f.write(f"effect {key}\n")
        print("writing", flush=True)
        time.sleep(pause)
        return "filed " + key

    return write_ticket


def waiting_call(target: str) -> tuple[str, str]:
    """A thread of agent "support" stopped at one pending ``write_ticket(key="k1")``: (thread
    id, call id)."""

    @tool(needs_approval=True)
    def write_ticket(key: str) -> str:
        "File a ticket (the write)."
        raise AssertionError("never run here")

    store = open_target(target)
    agent = define_agent(
        name="support",
        model=ReplayModel([Reply("", [("write_ticket", {"key": "k1"})])]),
        tools=[write_ticket],
        store=store,
    )
    first = agent.run_sync("file it")
    store.close()
    return first.thread_id, first.pending[0].call_id
