"""The agent loop's own overhead: loom_nb vs pydantic-ai, same work, same run.

Each run: the model (instant, no I/O) asks for one tool call, the tool returns a small dict,
the model answers with text. What is measured is everything around the model and the tool:
building requests, validating arguments, running the tool, recording messages, saving to the
in-memory store. Both libraries run the sync model function and the sync tool on worker
threads; pydantic-ai's run keeps its messages in a dict under a new random id, as loom_nb's
``memory_store()`` keeps the thread. Beside them, in the same run, the floor of any thread pool:
three bare round trips to a kept worker thread (a queue there, a lock back), the handoffs a run
with a sync model and one sync tool cannot do without; and loom_nb with no pool (the model and
the tool called on the loop, which loom_nb never does), which shows the loop's own work apart
from the handoffs. Run: ``python -m bench.bench_agent [--runs 1000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Awaitable, Callable


def lookup(city: str) -> dict[str, object]:
    """Look up the weather in a city."""
    return {"city": city, "temp_c": 21, "sky": "clear"}


def loom_runner() -> Callable[[], Awaitable[object]]:
    from loom_nb import FunctionModel, Reply, define_agent, memory_store, tool
    from loom_nb.models import ModelRequest

    def model(request: ModelRequest) -> Reply:
        last = request.messages[-1]
        if last.role == "tool":
            return Reply("It is 21°C and clear in Oslo.")
        return Reply("", [("lookup", {"city": "Oslo"})])

    agent = define_agent(
        name="bench", model=FunctionModel(model), tools=[tool(lookup)], store=memory_store()
    )

    async def run() -> object:
        result = await agent.run("Weather in Oslo?")
        assert result.output.startswith("It is 21")
        return result

    return run


def pydantic_ai_runner() -> Callable[[], Awaitable[object]]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1].parts[-1]
        if last.part_kind == "tool-return":
            return ModelResponse(parts=[TextPart("It is 21°C and clear in Oslo.")])
        return ModelResponse(parts=[ToolCallPart("lookup", {"city": "Oslo"})])

    agent = Agent(FunctionModel(model))
    agent.tool_plain(lookup)
    kept: dict[str, list[ModelMessage]] = {}  # the same work as loom_nb's memory store

    async def run() -> object:
        result = await agent.run("Weather in Oslo?")
        assert result.output.startswith("It is 21")
        kept[os.urandom(16).hex()] = result.all_messages()
        return result

    return run


def loom_inline_runner() -> Callable[[], Awaitable[object]]:
    """loom_nb with the model function and the tool called on the loop itself, not on the pool:
    not how loom_nb runs sync code (it would block the loop), a diagnostic that splits the cost
    per run into the loop's own work and the pool's handoffs."""
    from loom_nb import _loop_thread

    run = loom_runner()
    pooled = _loop_thread.in_thread

    async def inline(fn: Callable[..., object], /, *args: object, **kwargs: object) -> object:
        return fn(*args, **kwargs)

    async def run_inline() -> object:
        _loop_thread.in_thread = inline  # type: ignore[assignment]
        try:
            return await run()
        finally:
            _loop_thread.in_thread = pooled

    return run_inline


def handoffs_runner() -> Callable[[], Awaitable[object]]:
    """Three calls of an instant function on a kept worker thread, the caller polling until
    each returns (the quickest wait here, then blocking): the least a pool does for one model
    call, one tool call and one more model call (no event-loop wake, no future, no context)."""
    import queue
    import threading

    def wait(done: threading.Lock) -> None:
        end = time.monotonic() + 0.0002
        while not done.acquire(blocking=False):
            if time.monotonic() > end:
                done.acquire()
                return
            os.sched_yield()

    inbox: queue.SimpleQueue[threading.Lock] = queue.SimpleQueue()

    def serve() -> None:
        while True:
            done = inbox.get()
            lookup("Oslo")
            done.release()

    threading.Thread(target=serve, name="bench-worker", daemon=True).start()

    async def run() -> object:
        for _ in range(3):
            done = threading.Lock()
            done.acquire()
            inbox.put(done)
            wait(done)
        return None

    return run


async def measure(
    run: Callable[[], Awaitable[object]], runs: int
) -> tuple[list[float], list[float]]:
    """Wall seconds per run, and the process's CPU seconds per run (all its threads: less
    moved than the wall clock by other processes on a shared machine)."""
    for _ in range(min(50, runs)):  # warm up
        await run()
    times, cpu = [], []
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        await run()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return times, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3, help="alternate the libraries this often")
    args = parser.parse_args()
    runners = {
        "loom_nb": loom_runner(),
        "pydantic-ai": pydantic_ai_runner(),
        "3 handoffs": handoffs_runner(),
        "no pool": loom_inline_runner(),
    }
    samples: dict[str, list[float]] = {name: [] for name in runners}
    cpu: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(args.rounds):  # interleave, so machine noise hits both alike
        for name, run in runners.items():
            wall, used = asyncio.run(measure(run, args.runs // args.rounds))
            samples[name] += wall
            cpu[name] += used
    medians = {name: statistics.median(t) * 1e6 for name, t in samples.items()}
    cpu_means = {name: statistics.fmean(t) * 1e6 for name, t in cpu.items()}
    print(f"agent loop, one tool call per run, {len(samples['loom_nb'])} runs each")
    print(f"{'library':<12} {'median µs/run':>14} {'p90 µs/run':>11} {'CPU µs/run (mean)':>18}")
    for name, t in samples.items():
        p90 = statistics.quantiles(t, n=10)[-1] * 1e6
        print(f"{name:<12} {medians[name]:>14.1f} {p90:>11.1f} {cpu_means[name]:>18.1f}")
    print(f"loom_nb's own cost per run: {medians['loom_nb']:.1f} µs (goal: at most 150 µs)")
    own = medians["no pool"]
    print(
        f"of which the loop's own work (model and tool called inline, 'no pool') is {own:.1f} µs"
        f" and the pool's three handoffs {medians['loom_nb'] - own:.1f} µs, beside "
        f"{medians['3 handoffs']:.1f} µs for three bare handoffs with no work between them"
    )
    print(
        f"ratio loom_nb / pydantic-ai (median): {medians['loom_nb'] / medians['pydantic-ai']:.2f}"
    )


if __name__ == "__main__":
    main()
