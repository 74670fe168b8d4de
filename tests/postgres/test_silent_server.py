"""A PostgreSQL connection that stops answering (a local proxy that goes silent, as a dropped
VPN or a hung pooler does: nothing is closed) mid-append, mid-decision and mid-write: the run
ends in StoreTimeout within the store's deadline, saying what may not be saved; Ctrl-C returns
within a second; the write runs at most once; another kernel takes the thread over.

The kernels are real processes; the proxy is this test's (the server is real)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from loom_nb import ReplayModel, StoreError, UserError, define_agent
from loom_nb.postgres import postgres_store
from tests.postgres._proxy import SilentProxy
from tests.postgres_server import LoomDatabase
from tests.stores._processes import CHILD, ticket_writer

pytestmark = pytest.mark.postgres

TIMEOUT = 2.0

# A kernel: an agent whose store goes through the proxy, with a write that needs approval.
_KERNEL = (
    CHILD
    + """
import json, time
from loom_nb import ReplayModel, Reply, define_agent
from loom_nb.postgres import postgres_store

dsn, schema, side, what = sys.argv[1:5]
write_ticket = ticket_writer(side, pause=0.1)  # says "writing": the test silences the proxy now
store = postgres_store(dsn, schema=schema, timeout=float(sys.argv[5]))
replies = [Reply("", [("write_ticket", {"key": "k1"})]), "Filed.", "More."]
agent = define_agent(name="support", model=ReplayModel(replies), tools=[write_ticket],
                     store=store, interrupt_wait=5)
first = agent.run_sync("file a ticket")
thread_id, call_id = first.thread_id, first.pending[0].call_id
if what == "append":  # a thread with nothing waiting, so a new prompt appends
    agent.resume_sync(thread_id, {call_id: True})
print("ready " + json.dumps([thread_id, call_id]), flush=True)
sys.stdin.readline()  # the test arms the proxy
started = time.monotonic()
try:
    if what == "append":
        agent.run_sync("and another", thread_id=thread_id)
    else:
        agent.resume_sync(thread_id, {call_id: True})
    print("end finished", flush=True)
except KeyboardInterrupt:
    print("end interrupted " + json.dumps([time.monotonic() - started, ""]), flush=True)
except Exception as exc:
    print("end " + type(exc).__name__ + " " + json.dumps([time.monotonic() - started, str(exc)]),
          flush=True)
"""
)


def kernel(proxy: SilentProxy, database: LoomDatabase, schema: str, side: Path, what: str):
    dsn = database.dsn().replace(f":{database.server.port}/", f":{proxy.port}/")
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(_KERNEL),
            dsn,
            schema,
            str(side),
            what,
            str(TIMEOUT),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def line(child: subprocess.Popen[str], prefix: str) -> str:
    assert child.stdout is not None
    while True:
        got = child.stdout.readline()
        assert got, child.stderr.read() if child.stderr else ""
        if got.startswith(prefix):
            return got[len(prefix) :].strip()


# What the proxy waits for before it goes silent: the append's insert, the decision's locking
# read of the pending calls (a lease's take locks the row too); mid-write it goes silent while
# the tool runs (so its result cannot be saved).
TRIGGERS = {"append": b".messages (thread_id", "decision": b"SELECT pending", "write": None}


def test_the_connection_has_its_deadlines(loom_database: LoomDatabase, postgres_schema: str):
    store = postgres_store(loom_database.dsn(), schema=postgres_schema, timeout=3)
    conn = store._source._conn  # type: ignore[union-attr]
    said = conn.info.get_parameters()
    assert said["keepalives"] == "1" and said["tcp_user_timeout"] == "3000"
    assert conn.execute("SHOW statement_timeout").fetchone()[0] == "3s"
    store.close()
    given = "options=-c%20statement_timeout%3D7000&tcp_user_timeout=9000"  # the string wins
    store = postgres_store(f"{loom_database.dsn()}?{given}", schema=postgres_schema)
    conn = store._source._conn  # type: ignore[union-attr]
    assert conn.info.get_parameters()["tcp_user_timeout"] == "9000"
    assert conn.execute("SHOW statement_timeout").fetchone()[0] == "7s"
    store.close()
    with pytest.raises(UserError, match=r"timeout=\.\.\.\) is the seconds"):
        postgres_store(loom_database.dsn(), schema=postgres_schema, timeout=0)


def test_a_hung_call_holds_the_connection_no_longer_than_its_deadline(
    loom_database: LoomDatabase, postgres_schema: str
):
    proxy = SilentProxy(loom_database.server.port)
    dsn = loom_database.dsn().replace(f":{loom_database.server.port}/", f":{proxy.port}/")
    store = postgres_store(dsn, schema=postgres_schema, timeout=TIMEOUT)
    proxy.silent.set()
    errors: list[tuple[str, float]] = []
    started = time.monotonic()

    def call(what: str) -> None:
        try:
            store.list() if what == "list" else store.load("some-thread")
        except StoreError as exc:
            errors.append((str(exc), time.monotonic() - started))

    first = threading.Thread(target=call, args=("list",))
    first.start()
    assert proxy.holding.wait(10)  # the first call is sent and hung, holding the connection
    call("load")  # waits for the hung call's connection, not longer than its own deadline
    first.join()
    proxy.close()
    store.close()
    print(f"\n{errors}")
    assert len(errors) == 2 and all(took < TIMEOUT + 1 for _, took in errors)
    said = " | ".join(text for text, _ in errors)
    assert "did not answer within 2 s while listing threads" in said
    assert "still busy with another call" in said or "reading thread" in said


@pytest.mark.slow
@pytest.mark.parametrize("interrupt", [False, True], ids=["deadline", "ctrl-c"])
@pytest.mark.parametrize("what", ["append", "decision", "write"])
def test_a_silent_server_ends_the_run_in_time_and_another_kernel_goes_on(
    tmp_path: Path, loom_database: LoomDatabase, postgres_schema: str, what: str, interrupt: bool
):
    proxy = SilentProxy(loom_database.server.port)
    side = tmp_path / "side.log"
    child = kernel(proxy, loom_database, postgres_schema, side, what)
    try:
        thread_id, call_id = json.loads(line(child, "ready "))
        proxy.silent_on = TRIGGERS[what]
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
        if what == "write":
            line(child, "writing")
            proxy.silent.set()
        else:
            deadline = time.monotonic() + 10
            while not proxy.silent.is_set():
                assert time.monotonic() < deadline, "the trigger never came"
                time.sleep(0.01)
        silent_at = time.monotonic()
        if interrupt:
            time.sleep(0.3)
            sent = time.monotonic()
            child.send_signal(signal.SIGINT)
            ended = line(child, "end ")
            took = time.monotonic() - sent
            print(f"\n{what}: Ctrl-C returned after {took:.2f} s ({ended[:60]})")
            assert ended.startswith("interrupted")
            assert took < 1.0
        else:
            ended = line(child, "end ")
            took = time.monotonic() - silent_at
            kind, _, said = ended.partition(" ")
            message = json.loads(said)[1]
            print(f"\n{what}: {kind} after {took:.2f} s: {message}")
            assert kind == "StoreTimeout", ended
            assert took < TIMEOUT + 1.5
            assert f"did not answer within {TIMEOUT:g} s" in message
            assert thread_id in message
            if what == "decision":
                assert "may or may not have been saved" in message and "Nothing ran" in message
            else:  # what is kept, and what may not be
                assert "are saved" in message or "completed no message" in message
                assert (
                    "saving a message" in message or "ran; its result could not be saved" in message
                )
        child.stdin.close()
        child.wait(20)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        proxy.close()  # the server notices the kernel is gone

    # Another kernel (this process) takes the thread over and carries every call to done.
    store = postgres_store(loom_database.dsn(), schema=postgres_schema)
    agent = define_agent(
        name="support",
        model=ReplayModel(["Filed.", "Done."]),
        tools=[ticket_writer(side)],
        store=store,
    )
    thread = agent.thread(thread_id)
    states = {p.call_id: p.state for p in thread.pending}
    if states.get(call_id) == "pending":
        agent.resume_sync(thread_id, {call_id: True})
    elif states.get(call_id) == "unknown":
        agent.resume_sync(thread_id, {call_id: "happened"})
    elif states.get(call_id) == "approved":
        agent.resume_sync(thread_id, {call_id: True})
    if what == "append":
        agent.run_sync("again", thread_id=thread_id)
    after = agent.thread(thread_id)
    store.close()
    effects = Counter(side.read_text().splitlines()) if side.exists() else Counter()
    print(f"{what}: the call was {states.get(call_id, 'done')}; effects {dict(effects)}")
    assert after.status == "complete" and after.pending == []
    assert effects["effect k1"] == 1  # ran once: before the silence, or by the next kernel
    if what == "write":
        assert states.get(call_id) in ("unknown", None)  # never pending or approved again


@pytest.mark.parametrize(
    "said",
    [
        "connection failed: FATAL:  the database system is starting up",
        "connection failed: FATAL:  the database system is shutting down",
        "server closed the connection unexpectedly",
    ],
)
def test_a_server_restarting_is_not_blamed_on_the_connection_string(said: str):
    import psycopg

    from loom_nb.postgres._connections import _connect_error

    error = _connect_error(psycopg.OperationalError(said), {"host": "db", "user": "app"})
    assert "the server is restarting" in str(error)
    assert "check the connection string" not in str(error)


@pytest.mark.parametrize("timeout", [float("nan"), float("inf"), 0, -1, True, "5"])
def test_the_timeout_is_a_positive_finite_number(timeout: object):
    with pytest.raises(UserError, match=r"postgres_store\(timeout=\.\.\.\) is the seconds"):
        postgres_store("postgresql://nobody@127.0.0.1:1/none", timeout=timeout)  # type: ignore[arg-type]
