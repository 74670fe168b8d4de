"""Synchronous entry points work in scripts, inside a running loop (Jupyter), and on Ctrl-C."""

from __future__ import annotations

import asyncio
import os
import signal
import threading

import pytest

from loom_nb import ReplayModel, Reply, UserError, define_agent, tool


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
