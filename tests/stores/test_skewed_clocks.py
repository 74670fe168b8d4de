"""Kernels on other machines whose clocks are 45 s off (each its own UTS namespace, so its own
host name, and libfaketime), on SQLite and PostgreSQL: a kernel ahead never sees another's
live write as unknown nor runs it again; a kernel behind takes a dead kernel's call over
within a lease's length of its death, not 45 s later. Leases are judged by the store's clock
(PostgreSQL's server; SQLite: how long the store watched a lease stay unrenewed)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

from loom_nb import ReplayModel, define_agent
from loom_nb._lease import LEASE_SECONDS, RENEW_SECONDS
from tests.conftest import require
from tests.stores._processes import OPEN_STORE, open_target, waiting_call

pytestmark = pytest.mark.slow

FAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1")

_KERNEL = (
    OPEN_STORE
    + """
import json, time
from collections import Counter
from loom_nb import ReplayModel, UserError, define_agent

side, thread_id, call_id, role = sys.argv[2:6]
write_ticket = ticket_writer(side, pause=12)  # slow, so leases are renewed while it runs

# a reply for each look the watcher may take after the write (a slow machine: all of them)
agent = define_agent(name="support", model=ReplayModel(["Filed."] * 20), tools=[write_ticket],
                     store=store)
if role == "writer":
    agent.resume_sync(thread_id, {call_id: True})
    print("wrote", flush=True)
else:  # the other kernel: looks, and does what the card would let it, until told to stop
    seen = Counter()
    for _ in range(int(sys.argv[6])):
        state = {p.call_id: p.state for p in agent.thread(thread_id).pending}.get(call_id, "done")
        seen[state] += 1
        try:
            if state == "unknown":
                agent.resume_sync(thread_id, {call_id: "retry"})  # what its card offers
                seen["ran it again"] += 1
            else:
                agent.run_sync("anything new?", thread_id=thread_id)
        except UserError as exc:
            seen[type(exc).__name__] += 1
        time.sleep(0.5)
    print(json.dumps(seen), flush=True)
"""
)


def kernel(target: str, host: str, skew: str, *args: str) -> subprocess.Popen[str]:
    unshare = shutil.which("unshare")
    require(unshare is not None and FAKETIME.exists(), "unshare or libfaketime is missing")
    return subprocess.Popen(
        [
            str(unshare),
            "-ru",
            "sh",
            "-c",
            f'hostname {host} && LD_PRELOAD={FAKETIME} FAKETIME="{skew}" exec "$@"',
            "sh",
            sys.executable,
            "-c",
            textwrap.dedent(_KERNEL),
            target,
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def line(child: subprocess.Popen[str], expected: str) -> None:
    assert child.stdout is not None
    got = child.stdout.readline()
    assert got.strip() == expected, (got, child.stderr.read() if child.stderr else "")


@pytest.mark.parametrize(("writer", "watcher"), [("-45s", "+45s"), ("+45s", "-45s")])
def test_a_live_write_is_never_unknown_nor_run_again_by_a_kernel_with_another_clock(
    target: str, tmp_path: Path, writer: str, watcher: str
):
    side = tmp_path / "side.log"
    thread_id, call_id = waiting_call(target)
    first = kernel(target, "host-a", writer, str(side), thread_id, call_id, "writer")
    line(first, "writing")
    other = kernel(target, "host-b", watcher, str(side), thread_id, call_id, "watcher", "16")
    out, err = other.communicate(timeout=60)
    line(first, "wrote")
    first.wait(30)
    seen = json.loads(out or "{}")
    effects = Counter(side.read_text().splitlines())
    print(f"\nwriter {writer}, watcher {watcher}: the watcher saw {seen}; effects {dict(effects)}")
    assert other.returncode == 0, err
    assert seen.get("unknown", 0) == 0 and seen.get("ran it again", 0) == 0
    assert seen.get("running", 0) > 0  # it looked while the write ran
    assert effects == {"effect k1": 1}


def test_a_kernel_behind_takes_a_dead_kernels_call_over_within_a_lease(target: str, tmp_path: Path):
    side = tmp_path / "side.log"
    thread_id, call_id = waiting_call(target)
    first = kernel(target, "host-a", "+45s", str(side), thread_id, call_id, "writer")
    line(first, "writing")
    store = open_target(target)  # the kernel behind: its store, polled as its card reloads
    behind = define_agent(name="support", model=ReplayModel(["Noted."]), store=store)
    time.sleep(1)
    first.send_signal(signal.SIGKILL)
    first.wait()
    killed = time.monotonic()
    while True:
        state = {p.call_id: p.state for p in behind.thread(thread_id).pending}[call_id]
        if state == "unknown":
            break
        assert time.monotonic() - killed < LEASE_SECONDS + RENEW_SECONDS + 10, state
        time.sleep(0.25)
    took = time.monotonic() - killed
    done = behind.resume_sync(thread_id, {call_id: "happened"})
    store.close()
    print(f"\nthe kernel behind saw the dead kernel's call as unknown {took:.1f} s after the kill")
    assert took <= LEASE_SECONDS + RENEW_SECONDS + 2
    assert done.status == "complete"
    assert Counter(side.read_text().splitlines()) == {"effect k1": 1}
