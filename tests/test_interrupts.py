"""Ctrl-C, as a real SIGINT to a real process, whatever the run is doing: user code that
sleeps in a sync model function, a sync tool, or (blocking the loop) an async tool.

KeyboardInterrupt comes within a second, the interrupted run appends nothing afterwards (its
late reply is dropped; the thread notes the interruption), and the next run on the thread works.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

pytestmark = pytest.mark.slow

_CHILD = """
import asyncio, json, sys, time
from loom_nb import FunctionModel, ReplayModel, Reply, define_agent, memory_store, tool

case = sys.argv[1]
SLEEP = 1.5

def say(text):
    print(text, flush=True)

def model_function(request):
    if len(request.messages) == 1:  # the first turn: sleeps, then would answer
        say("in")
        time.sleep(SLEEP)
        return "the late reply"
    return "next ok"

@tool
def slow_sync() -> str:
    "Sleeps."
    say("in")
    time.sleep(SLEEP)
    return "late result"

@tool
async def slow_async() -> str:
    "Blocks the event loop (a mistake the watchdog names)."
    say("in")
    time.sleep(SLEEP)
    return "late result"

if case == "model":
    model = FunctionModel(model_function)
    tools = []
else:
    name = "slow_sync" if case == "sync_tool" else "slow_async"  # async_tool, async_tool_now
    model = ReplayModel([Reply("Working.", [(name, {})]), "next ok"])
    tools = [slow_sync, slow_async]
agent = define_agent(name="a", model=model, tools=tools, store=memory_store())
try:
    agent.run_sync("go")
    say("not interrupted")
except KeyboardInterrupt:
    say("interrupted")
[info] = agent.threads()
at_interrupt = [m.to_dict() for m in agent.thread(info.id).messages]
if not case.endswith("_now"):
    time.sleep(SLEEP + 0.5)  # the abandoned work ends meanwhile
thread = agent.thread(info.id)
later = [m.to_dict() for m in thread.messages]
error = thread.error
after = agent.run_sync("again", thread_id=info.id)  # _now: while the abandoned run still blocks
final = agent.thread(info.id)
say(json.dumps({"unchanged": later == at_interrupt, "roles": [m["role"] for m in later],
                "error": error, "next": [after.status, after.output],
                "late": "late" in json.dumps([m.to_dict() for m in final.messages])}))
"""


CASES = ("model", "sync_tool", "async_tool", "async_tool_now")


@pytest.fixture(scope="module")
def interrupted() -> dict[str, dict]:
    """Each case in its own process, at once: how long Ctrl-C took, and what was saved."""
    children = {
        case: subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(_CHILD), case],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for case in CASES
    }
    seen: dict[str, dict] = {}
    for proc in children.values():  # the barrier: each child says "in" from its user code
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "in", proc.stderr.read()  # type: ignore[union-attr]

    def interrupt(case: str) -> None:
        proc = children[case]
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        line = proc.stdout.readline().strip()  # type: ignore[union-attr]
        seen[case] = {"seconds": time.monotonic() - sent, "line": line}

    waiters = [threading.Thread(target=interrupt, args=(case,)) for case in children]
    for w in waiters:
        w.start()
    for w in waiters:
        w.join(30)
    for case, proc in children.items():
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        seen[case].update(json.loads(out.strip().splitlines()[-1]), stderr=err)
    return seen


@pytest.mark.parametrize("case", CASES)
def test_ctrl_c_returns_within_a_second_and_the_run_appends_nothing_after(interrupted, case):
    seen = interrupted[case]
    print(f"\n{case}: KeyboardInterrupt {seen['seconds']:.2f} s after SIGINT")
    assert seen["line"] == "interrupted"
    assert seen["seconds"] < 1.0
    assert not seen["late"]  # the abandoned work's reply never reached the thread
    assert seen["next"] == ["complete", "next ok"]  # the next run on the thread works
    if case.endswith("_now"):  # it ran while the abandoned run still blocked the loop
        return
    assert seen["unchanged"], seen
    expected = ["user"] if case == "model" else ["user", "assistant"]
    assert seen["roles"] == expected
    assert "interrupted" in seen["error"]


def test_an_async_tool_that_blocks_the_loop_is_named(interrupted):
    assert (
        "tool 'slow_async' has blocked loom_nb's event loop" in interrupted["async_tool"]["stderr"]
    )
    assert "blocked" not in interrupted["sync_tool"]["stderr"]
