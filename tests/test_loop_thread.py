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


def _worker_calls(workers: _loop_thread._Workers, fn: object, count: int) -> list[object]:
    """``count`` calls of ``fn`` on ``workers``, one after another, as a run makes them."""
    results = []
    for _ in range(count):
        job = _loop_thread._Handoff(fn, (), {})  # type: ignore[arg-type]
        workers.run(job)
        assert job.ready.acquire(timeout=10)
        assert job.outcome is not None
        results.append(job.outcome[0])
    return results


def test_calls_one_after_another_take_the_same_worker_whether_it_polls_or_sleeps():
    # A worker that just finished polls for the next call a moment, then blocks: a call in
    # either window is taken by it (none is lost, the pool does not grow).
    workers = _loop_thread._Workers()
    quick = _worker_calls(workers, threading.get_ident, 20)
    slow = []
    for _ in range(3):
        threading.Event().wait(_loop_thread.WARM_SECONDS * 4)  # past the polling
        slow += _worker_calls(workers, threading.get_ident, 1)
    assert len(set(quick + slow)) == 1
    assert threading.get_ident() not in quick


def test_an_idle_worker_ends(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(_loop_thread._Workers, "IDLE_SECONDS", 0.05)
    workers = _loop_thread._Workers()
    (ident,) = _worker_calls(workers, threading.get_ident, 1)
    worker = next(t for t in threading.enumerate() if t.ident == ident)
    worker.join(5)
    assert not worker.is_alive()
    assert _worker_calls(workers, lambda: "again", 1) == ["again"]  # a new one starts


@pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="pinning idle workers next to their caller needs Linux and two processors",
)
def test_a_sync_call_and_the_threads_it_starts_may_use_every_processor():
    # Idle workers wait pinned to their caller's processor (cheap wake-ups); the call itself,
    # and what it starts (a DuckDB or BLAS pool, say), must not stay pinned to it.
    def processors() -> tuple[set[int], set[int]]:
        seen: list[set[int]] = []
        started = threading.Thread(target=lambda: seen.append(os.sched_getaffinity(0)))
        started.start()
        started.join()
        return os.sched_getaffinity(0), seen[0]

    every = os.sched_getaffinity(0)
    workers = _loop_thread._Workers()
    calls = _worker_calls(workers, processors, 5)  # the later ones by a worker pinned meanwhile
    assert calls == [(every, every)] * 5
    assert _loop_thread._nearby.here() in every


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
def test_a_forked_child_runs_sync_calls_on_workers_of_its_own():
    # The parent's idle workers do not exist in the child: handing them a call waited forever.
    assert asyncio.run(_loop_thread.in_thread(lambda: "parent")) == "parent"
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: answer through the pipe, never return into pytest
        try:
            signal.alarm(10)
            answer = asyncio.run(_loop_thread.in_thread(lambda: "child"))
            os.write(write, answer.encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        answer = pipe.read()
    os.waitpid(pid, 0)
    assert answer == "child"
