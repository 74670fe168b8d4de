"""One run per thread across real processes that share a host name but not process numbers:
kernels in containers on one machine (Docker with the host's network, Kubernetes pods with
``hostNetwork``), each in a PID namespace of its own. A live run there is never taken for a
dead process here."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from loom_nb import CallAlreadyDecided, ReplayModel, Reply, Store, ThreadBusy, define_agent, tool
from loom_nb.sqlite import sqlite_store
from tests.conftest import require
from tests.stores._processes import OPEN_STORE

pytestmark = pytest.mark.slow

# Runs as process 1 of a new PID namespace: its child (the kernel) gets process number
# ``target``, which no process of this namespace has, as a container's kernel would.
_CONTAINER = """
import subprocess, sys
with open("/proc/sys/kernel/ns_last_pid", "w") as f:
    f.write(str(int(sys.argv[1]) - 1))
sys.exit(subprocess.call(sys.argv[2:]))
"""

_KERNEL = (
    OPEN_STORE
    + """
import os, sys
from loom_nb import FunctionModel, define_agent, tool

where, thread_id, what = sys.argv[1], sys.argv[2], sys.argv[3]

@tool(needs_approval=True)
def write_ticket(key: str) -> str:
    "File a ticket (the write)."
    print("effect", os.getpid(), flush=True)
    sys.stdin.readline()
    return "filed " + key

def model(request):
    if request.messages[-1].text == "slow":
        print("thinking", os.getpid(), flush=True)
        sys.stdin.readline()
    return "done"

agent = define_agent(name="a", model=FunctionModel(model), tools=[write_ticket], store=store)
if what == "run":
    agent.run_sync("slow", thread_id=thread_id)
else:
    agent.resume_sync(thread_id, {what: True})
print("finished", flush=True)
"""
)


def free_pid() -> int:
    """A process number no process here has, below the next one this namespace hands out (so
    it is not handed out during the test)."""
    latest = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        text=True,
        capture_output=True,
        check=True,
    )
    for pid in range(int(latest.stdout) - 200, 300, -1):
        if not os.path.exists(f"/proc/{pid}"):
            return pid
    raise AssertionError("no free process number")


def in_container(where: str, thread_id: str, what: str) -> subprocess.Popen[str]:
    """The kernel in a new PID namespace, with the host name of this machine."""
    pid = free_pid()
    kernel = [sys.executable, "-c", textwrap.dedent(_KERNEL), where, thread_id, what]
    wrapper = [sys.executable, "-c", textwrap.dedent(_CONTAINER), str(pid), *kernel]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", *wrapper],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Store]]:
    """Where both kernels keep threads (as the kernel reads it), and a store on it here."""
    probe = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], check=False)
    require(probe.returncode == 0, "unshare cannot make a PID namespace here (needs root)")
    if request.param == "postgres":
        from loom_nb.postgres import postgres_store

        database, schema = (
            request.getfixturevalue("loom_database"),
            request.getfixturevalue("postgres_schema"),
        )
        where, store = f"{database.dsn()}#{schema}", postgres_store(database.dsn(), schema=schema)
    else:
        path = tmp_path / "loom.db"
        where, store = str(path), sqlite_store(path)
    yield where, store
    store.close()


def wait_for(kernel: subprocess.Popen[str], word: str) -> int:
    """The kernel's own process number, once it printed ``word``."""
    assert kernel.stdout is not None
    line = kernel.stdout.readline()
    assert line.startswith(word), line + kernel.communicate(timeout=30)[1]
    return int(line.split()[1])


def go_on(kernel: subprocess.Popen[str]) -> str:
    out, err = kernel.communicate("\n", timeout=60)
    assert kernel.returncode == 0, err
    return out


def test_a_run_in_another_container_is_busy_not_dead(shared: tuple[str, Store]):
    where, store = shared
    agent = define_agent(name="a", model=ReplayModel(["hello", "again"]), store=store)
    thread_id = agent.run_sync("hi").thread_id
    kernel = in_container(where, thread_id, "run")
    try:
        pid = wait_for(kernel, "thinking")
        assert not os.path.exists(f"/proc/{pid}")  # its number means nothing here
        busy = rf"{thread_id} is running in another kernel \(process {pid} of another container"
        with pytest.raises(ThreadBusy, match=busy):
            agent.run_sync("meanwhile", thread_id=thread_id)
    finally:
        assert "finished" in go_on(kernel)
    assert agent.run_sync("after", thread_id=thread_id).output == "again"
    texts = [m.text for m in agent.thread(thread_id).messages]
    assert texts == ["hi", "hello", "slow", "done", "after", "again"]


def test_an_approved_write_running_in_another_container_is_running_not_unknown(
    shared: tuple[str, Store],
):
    where, store = shared

    @tool(needs_approval=True)
    def write_ticket(key: str) -> str:
        "File a ticket (the write)."
        raise AssertionError("runs in the other container only")

    model = ReplayModel([Reply("", [("write_ticket", {"key": "k1"})])])
    agent = define_agent(name="a", model=model, tools=[write_ticket], store=store)
    waiting = agent.run_sync("file one")
    call_id = waiting.pending[0].call_id
    kernel = in_container(where, waiting.thread_id, call_id)
    try:
        wait_for(kernel, "effect")
        card = agent.thread(waiting.thread_id).pending[0]
        assert card.state == "running"  # its card: "is running in another kernel"
        with pytest.raises(CallAlreadyDecided, match=f"call {call_id} was already decided"):
            agent.resume_sync(waiting.thread_id, {call_id: "retry"})  # no "run it again"
    finally:
        out = go_on(kernel)
    assert "finished" in out
    thread = agent.thread(waiting.thread_id)
    assert thread.pending == [] and [r.content for r in thread.tool_results()] == ["filed k1"]
