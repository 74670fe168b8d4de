"""A new thread's run with one tool call is four writes, and its lease rides on the first and
the last (the thread is made held with its prompt; the answer frees it). A real kernel,
SIGKILLed before and after each of them, loses none of the writes that completed, leaves no
write half-done, and leaves no live lease: another kernel of this machine takes the thread at
once (its holder's process is gone), or finds it free after the last write."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from loom_nb import ReplayModel, define_agent, tool
from tests.stores._processes import OPEN_STORE, open_target, saved_thread

pytestmark = pytest.mark.slow

# The kernel: its store says where each write of the run stands ("before 2 append <thread>")
# and waits for a line on stdin at each point, so the test kills it exactly there.
_KERNEL = (
    OPEN_STORE
    + """
import itertools
from loom_nb import ReplayModel, Reply, define_agent, tool

side = sys.argv[2]
count = itertools.count(1)

def point(word, n, name, thread):
    print(word, n, name, thread.id, flush=True)
    sys.stdin.readline()

class Paused:
    '''The store, pausing before and after each write a run makes (a renewal by the keeper
    goes through as it is: it is no write of the run).'''

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def _write(self, name, thread, *args, **kwargs):
        n = next(count)
        point("before", n, name, thread)
        out = getattr(self.inner, name)(thread, *args, **kwargs)
        point("after", n, name, thread)
        return out

    def start(self, thread, *args, **kwargs):
        return self._write("start", thread, *args, **kwargs)

    def append(self, thread, *args, **kwargs):
        return self._write("append", thread, *args, **kwargs)

    def finish(self, thread, *args, **kwargs):
        return self._write("finish", thread, *args, **kwargs)

@tool
def note(text: str) -> str:
    "Note a line (the side effect)."
    with open(side, "a") as f:
        f.write("effect " + text + "\\n")
    return "noted " + text

model = ReplayModel([Reply("", [("note", {"text": "x"})]), "Noted."])
agent = define_agent(name="a", model=model, tools=[note], store=Paused(store))
agent.run_sync("note x")
print("finished", flush=True)
"""
)

#: What the run's writes save, in order, and which of them carries the lease.
_WRITES = [("start", "user"), ("append", "assistant"), ("append", "tool"), ("finish", "assistant")]
_POINTS = [(w, n) for n in range(1, 5) for w in ("before", "after")]


def killed_at(target: str, side: Path, where: str, n: int) -> str | None:
    """Run the kernel until it reaches ``where`` (before / after) write ``n``, SIGKILL it
    there; the thread's id (None when it was killed before the thread had one)."""
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_KERNEL), target, str(side)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None
    thread_id = None
    seen = []
    while True:
        line = child.stdout.readline()
        assert line, f"the kernel ended before {where} {n}: {seen} {child.communicate()[1]}"
        word, number, name, thread_id = line.split()
        seen.append((word, int(number), name))
        if (word, int(number)) == (where, n):
            break
        child.stdin.write("\n")
        child.stdin.flush()
    assert [s for s in seen if s[0] == "after"] == [
        ("after", i + 1, w[0]) for i, w in enumerate(_WRITES[: len(seen) // 2])
    ]
    child.send_signal(signal.SIGKILL)
    child.communicate()
    assert child.returncode == -signal.SIGKILL
    return thread_id


@pytest.mark.parametrize(("where", "n"), _POINTS, ids=[f"{w}-{n}" for w, n in _POINTS])
def test_a_kill_at_any_write_of_a_run_loses_nothing_and_leaves_no_live_lease(
    target: str, tmp_path: Path, where: str, n: int
):
    side = tmp_path / "side"
    thread_id = killed_at(target, side, where, n)
    done = n if where == "after" else n - 1  # writes that completed
    saved = saved_thread(target, thread_id or "")
    if done == 0:
        assert saved is None  # nothing was written: no thread, no lease
        return
    assert saved is not None
    assert [m.role for m in saved.messages] == [role for _, role in _WRITES[:done]]
    if done == 4:
        assert saved.lease is None  # the answer freed it, in its own write
        assert saved.error is None
    else:
        assert saved.lease is not None  # the dead kernel's, taken with the first write
    # the tool runs between writes 2 and 3 (its call saved first, its result then)
    ran = side.read_text().splitlines() if side.exists() else []
    assert ran == (["effect x"] if n >= 3 else [])

    @tool
    def note(text: str) -> str:
        "Note a line (the side effect)."
        return "noted " + text

    store = open_target(target)
    try:
        agent = define_agent(name="a", model=ReplayModel(["Again."]), tools=[note], store=store)
        began = time.monotonic()
        result = agent.run_sync("again", thread_id=thread_id)  # no ThreadBusy: taken at once
        assert time.monotonic() - began < 5
        roles = [m.role for m in result.thread.messages]
        dangling = done == 2  # the call was saved, its result never was
        assert roles == [r for _, r in _WRITES[:done]] + (["tool"] if dangling else []) + [
            "user",
            "assistant",
        ]
        if dangling:
            [closed] = result.thread.messages[2].tool_results
            assert "interrupted before it finished" in closed.content
        again = store.load(result.thread_id)
        assert again is not None and again.lease is None
    finally:
        store.close()
