"""A kernel that still holds its call saves a completed write's result: after a pause past its
lease (SIGSTOP, as a laptop lid or a paused VM) that no other kernel used, and after its
PostgreSQL server came back from a restart at the moment the write returned. When another
kernel did take the call over meanwhile, the paused one says that the write ran and that its
result could not be saved. Real processes, real signals, a real server restart; the leases
are made short (2 s) so the pauses are too."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

from loom_nb import ReplayModel, define_agent
from tests.stores._processes import OPEN_STORE, open_target, saved_thread, waiting_call

pytestmark = pytest.mark.slow

_KERNEL = (
    OPEN_STORE
    + """
import json
from loom_nb import _lease, LoomError, ReplayModel, define_agent

_lease.LEASE_SECONDS, _lease.RENEW_SECONDS = 2.0, 0.3
side, thread_id, call_id = sys.argv[2:5]
write_ticket = ticket_writer(side, pause=0.5)
agent = define_agent(name="support", model=ReplayModel(["Filed."]), tools=[write_ticket],
                     store=store)
try:
    result = agent.resume_sync(thread_id, {call_id: True})
    print(json.dumps(["ok", result.status]), flush=True)
except LoomError as exc:
    print(json.dumps([type(exc).__name__, str(exc)]), flush=True)
"""
)


def start(target: str, side: Path, thread_id: str, call_id: str) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_KERNEL), target, str(side), thread_id, call_id],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    got = child.stdout.readline()
    assert got.strip() == "writing", child.stderr.read() if child.stderr else ""
    return child


def ended(child: subprocess.Popen[str]) -> list[str]:
    out, err = child.communicate(timeout=90)
    assert child.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def test_a_kernel_paused_past_its_lease_saves_the_result_when_it_wakes(target: str, tmp_path: Path):
    side = tmp_path / "side.log"
    thread_id, call_id = waiting_call(target)
    child = start(target, side, thread_id, call_id)
    child.send_signal(signal.SIGSTOP)
    time.sleep(5)  # past the 2 s lease; no other kernel comes
    child.send_signal(signal.SIGCONT)
    said = ended(child)
    thread = saved_thread(target, thread_id)
    print(f"\nwoken: {said}")
    assert said == ["ok", "complete"]
    assert thread is not None and thread.status == "complete" and thread.pending == []
    assert [r.call_id for r in thread.tool_results()] == [call_id]
    assert Counter(side.read_text().splitlines()) == {"effect k1": 1}


def test_a_paused_kernel_whose_call_was_taken_over_says_the_write_ran(target: str, tmp_path: Path):
    side = tmp_path / "side.log"
    thread_id, call_id = waiting_call(target)
    child = start(target, side, thread_id, call_id)
    child.send_signal(signal.SIGSTOP)
    store = open_target(target)
    other = define_agent(name="support", model=ReplayModel(["Noted."]), store=store)
    deadline = time.monotonic() + 20
    while {p.call_id: p.state for p in other.thread(thread_id).pending}[call_id] != "unknown":
        assert time.monotonic() < deadline  # the lease lapses (by the store's clock)
        time.sleep(0.2)
    other.resume_sync(thread_id, {call_id: "failed"})  # the user, asked, says it failed
    child.send_signal(signal.SIGCONT)
    kind, message = ended(child)
    thread = other.thread(thread_id)
    store.close()
    print(f"\nwoken after a take-over: {kind}: {message}")
    assert kind == "ThreadBusy"
    assert "write_ticket ran, but its result could not be saved" in message
    assert [r.call_id for r in thread.tool_results()] == [call_id]  # the other kernel's only


@pytest.mark.postgres
def test_a_result_is_saved_once_the_server_is_back(
    tmp_path: Path, loom_database, postgres_schema: str
):
    target = f"{loom_database.dsn()}#{postgres_schema}"
    side = tmp_path / "side.log"
    thread_id, call_id = waiting_call(target)
    child = start(target, side, thread_id, call_id)
    server = loom_database.server
    server.halt()  # the write returns while the server is down
    time.sleep(3)
    server.start_again()
    said = ended(child)
    thread = saved_thread(target, thread_id)
    print(f"\nafter the restart: {said}")
    assert said == ["ok", "complete"]
    assert thread is not None and [r.call_id for r in thread.tool_results()] == [call_id]
    assert Counter(side.read_text().splitlines()) == {"effect k1": 1}
