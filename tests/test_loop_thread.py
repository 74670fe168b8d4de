"""Synchronous entry points work in scripts, inside a running loop (Jupyter), and on Ctrl-C."""

from __future__ import annotations

import asyncio
import os
import signal
import threading

import pytest

from loom_nb import ReplayModel, Reply, UserError, _loop_thread, define_agent, tool


def test_run_sync_works_inside_a_running_event_loop():
    agent = define_agent(name="a", model=ReplayModel(["inside"]))

    async def cell() -> str:  # like a notebook cell: the kernel's loop is running
        return agent.run_sync("hi").output

    assert asyncio.run(cell()) == "inside"


def test_a_sync_call_from_inside_a_run_is_refused_clearly():
    inner = define_agent(name="inner", model=ReplayModel(["x"]))

    @tool
    async def ask_inner() -> str:
        return inner.run_sync("nested").output

    outer = define_agent(
        name="outer", model=ReplayModel([Reply("", [("ask_inner", {})]), "ok"]), tools=[ask_inner]
    )
    result = outer.run_sync("go")
    error = result.thread.messages[2].tool_results[0].content
    assert "use the async form" in error


def test_keyboard_interrupt_cancels_the_run_and_keeps_what_completed():
    started = threading.Event()

    @tool
    async def slow() -> str:
        started.set()
        await asyncio.sleep(60)
        return "never"

    agent = define_agent(
        name="a", model=ReplayModel([Reply("Working.", [("slow", {})])]), tools=[slow]
    )
    # Ctrl-C / a kernel interrupt: SIGINT raises KeyboardInterrupt in the main thread.
    threading.Thread(
        target=lambda: started.wait(5) and os.kill(os.getpid(), signal.SIGINT), daemon=True
    ).start()
    with pytest.raises(KeyboardInterrupt, match=r"^$"):
        agent.run_sync("go")
    [info] = agent.threads()
    thread = agent.thread(info.id)
    assert [m.role for m in thread.messages] == ["user", "assistant"]
    assert "interrupted" in (thread.error or "")


def test_user_error_type_is_kept():
    agent = define_agent(name="a", model=ReplayModel([]))
    with pytest.raises(UserError, match="the prompt is empty"):
        agent.run_sync("")


def test_a_tool_still_running_from_an_abandoned_call_never_delays_the_next_calls():
    # Sync tools run on kept worker threads; one that never returns must not hold a later
    # call behind it (the pool grows instead of queueing).
    release = threading.Event()
    entered = threading.Event()

    @tool
    def hang() -> str:
        """Blocks until released."""
        entered.set()
        release.wait(30)
        return "late"

    @tool
    def quick(n: int) -> int:
        """Answers at once."""
        return n + 1

    hung = define_agent(
        name="hung", model=ReplayModel([Reply("", [("hang", {})]), "x"]), tools=[hang]
    )
    future = _loop_thread.submit(hung.run("go"))
    assert entered.wait(10)
    future.cancel()  # the caller gives up; the tool's thread runs on
    replies = [
        Reply("", [("quick", {"n": i})]) if j == 0 else "ok" for i in range(5) for j in (0, 1)
    ]
    fast = define_agent(name="fast", model=ReplayModel(replies), tools=[quick])
    try:
        for i in range(5):
            result = asyncio.run(asyncio.wait_for(fast.run(f"q{i}"), 10))
            assert result.thread.messages[2].tool_results[0].content == str(i + 1)
    finally:
        release.set()
