"""The PostgreSQL store across real processes: many kernels appending at once, kernels killed
mid-append, and the database server restarted between two runs."""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from loom_nb import Thread
from loom_nb.postgres import postgres_store
from tests.postgres_server import LoomDatabase
from tests.stores._processes import (
    assert_concurrent_appends_kept,
    assert_reported_appends_kept,
    kill_while_appending,
    write_at_once,
)

pytestmark = pytest.mark.postgres


def start(code: str, *args: str, stdin: bool = False) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdin=subprocess.PIPE if stdin else None,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


# ---- many kernels at once --------------------------------------------------------------------


def test_four_processes_appending_at_once_lose_nothing(
    loom_database: LoomDatabase, postgres_schema: str, tmp_path: Path
):
    dsn, count, names = loom_database.dsn(), 500, ["k1", "k2", "k3", "k4"]
    setup = postgres_store(dsn, schema=postgres_schema)  # the schema and the shared thread
    setup.save_thread(Thread(id="shared", agent="a"))
    setup.close()
    write_at_once(f"{dsn}#{postgres_schema}", names, count, tmp_path)
    store = postgres_store(dsn, schema=postgres_schema)
    assert_concurrent_appends_kept(store, names, count)
    store.close()


# ---- kernels killed mid-append ---------------------------------------------------------------


def test_sigkill_while_appending_loses_nothing_that_completed(
    loom_database: LoomDatabase, postgres_schema: str
):
    dsn = loom_database.dsn()
    kills = 50
    reported = kill_while_appending(
        f"{dsn}#{postgres_schema}", kills, random.Random(14), most_appends=80, most_pause=0.005
    )
    store = postgres_store(dsn, schema=postgres_schema)
    assert_reported_appends_kept(store, reported)
    assert len({t.split("-")[0] for t in reported}) == kills
    store.close()


# ---- the server restarted between two runs ---------------------------------------------------

_KERNEL = """
import sys
from loom_nb import ReplayModel, Reply, define_agent
from loom_nb.postgres import postgres_store

dsn, schema, thread_id = sys.argv[1], sys.argv[2], sys.argv[3]
store = postgres_store(dsn, schema=schema)
agent = define_agent(
    name="analyst", model=ReplayModel([Reply(text="one"), Reply(text="two")]), store=store
)
first = agent.run_sync("first", thread_id=None if thread_id == "-" else thread_id)
print(first.thread_id, flush=True)
sys.stdin.readline()  # the server restarts meanwhile
second = agent.run_sync("second", thread_id=first.thread_id)
print(len(agent.thread(first.thread_id).messages), flush=True)
"""


def test_the_server_restarted_between_two_runs_changes_nothing(
    loom_database: LoomDatabase, postgres_schema: str
):
    dsn = loom_database.dsn()
    kernel = start(_KERNEL, dsn, postgres_schema, "-", stdin=True)
    assert kernel.stdout is not None and kernel.stdin is not None
    thread_id = kernel.stdout.readline().strip()
    assert thread_id, kernel.stderr.read() if kernel.stderr else ""
    loom_database.server.restart()
    out, err = kernel.communicate("\n", timeout=120)
    assert kernel.returncode == 0, err
    assert out.strip() == "4"  # the same kernel carried on

    loom_database.server.restart()
    again = start(_KERNEL, dsn, postgres_schema, thread_id, stdin=True)  # a new kernel
    out, err = again.communicate("\n", timeout=120)
    assert again.returncode == 0, err
    assert out.split() == [thread_id, "8"]
    store = postgres_store(dsn, schema=postgres_schema)
    thread = store.load(thread_id)
    assert thread is not None
    assert [m.text for m in thread.messages] == ["first", "one", "second", "two"] * 2
    store.close()


# ---- the server stopping mid-turn ------------------------------------------------------------

_THINKING_KERNEL = """
import sys
from loom_nb import FunctionModel, StoreError, define_agent
from loom_nb.postgres import postgres_store

def model(request):
    if request.messages[-1].text == "mid":
        print("thinking", flush=True)
        sys.stdin.readline()  # the server stops meanwhile
    return "heard " + request.messages[-1].text

store = postgres_store(sys.argv[1], schema=sys.argv[2])
agent = define_agent(name="analyst", model=FunctionModel(model), store=store)
thread_id = agent.run_sync("first").thread_id
print(thread_id, flush=True)
try:
    agent.run_sync("mid", thread_id=thread_id)
    print("no error", flush=True)
except StoreError as exc:
    print("StoreError", exc, flush=True)
sys.stdin.readline()  # the server is back
print(agent.run_sync("next", thread_id=thread_id).output, flush=True)
"""


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_the_server_stopping_mid_turn_fails_that_turn_clearly_and_the_next_goes_on(
    loom_database: LoomDatabase, postgres_schema: str, mode: str
):
    kernel = start(_THINKING_KERNEL, loom_database.dsn(), postgres_schema, stdin=True)
    assert kernel.stdout is not None and kernel.stdin is not None
    thread_id = kernel.stdout.readline().strip()
    assert kernel.stdout.readline().strip() == "thinking", kernel.stderr
    loom_database.server.halt(mode)  # as a crash (immediate) or an admin's stop (fast) would
    try:
        kernel.stdin.write("\n")
        kernel.stdin.flush()
        said = kernel.stdout.readline().strip()
    finally:
        loom_database.server.start_again()
    out, err = kernel.communicate("\n", timeout=120)
    where = f"loom_app@127.0.0.1:{loom_database.server.port}/loom_tests"
    assert said.startswith(f"StoreError the PostgreSQL server {where} is unreachable"), said + err
    # The turn's answer is the run's last write (it frees the lease too): that is what failed.
    assert f"(saving the last message of a run to {thread_id}: nothing was saved)" in said, said
    assert said.endswith(
        f"Thread {thread_id}: the 1 message this run completed before that is saved"
    )
    assert out.strip() == "heard next", err
    store = postgres_store(loom_database.dsn(), schema=postgres_schema)
    thread = store.load(thread_id)
    assert thread is not None and thread.lease is None
    assert [m.text for m in thread.messages] == [
        "first",
        "heard first",
        "mid",
        "next",
        "heard next",
    ]
    store.close()
