"""The agent loop's own overhead: loom_nb vs pydantic-ai, same work, same run.

Each run: the model (instant, no I/O) asks for one tool call, the tool returns a small dict,
the model answers with text. What is measured is everything around the model and the tool:
building requests, validating arguments, running the tool, recording messages, saving to the
in-memory store. Run: ``python -m bench.bench_agent [--runs 1000]``.
"""

from __future__ import annotations

import argparse
import asyncio
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

    async def run() -> object:
        result = await agent.run("Weather in Oslo?")
        assert result.output.startswith("It is 21")
        return result

    return run


async def measure(run: Callable[[], Awaitable[object]], runs: int) -> list[float]:
    for _ in range(min(50, runs)):  # warm up
        await run()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        await run()
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3, help="alternate the libraries this often")
    args = parser.parse_args()
    runners = {"loom_nb": loom_runner(), "pydantic-ai": pydantic_ai_runner()}
    samples: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(args.rounds):  # interleave, so machine noise hits both alike
        for name, run in runners.items():
            samples[name] += asyncio.run(measure(run, args.runs // args.rounds))
    medians = {name: statistics.median(t) * 1e6 for name, t in samples.items()}
    print(f"agent loop, one tool call per run, {len(samples['loom_nb'])} runs each")
    print(f"{'library':<12} {'median µs/run':>14} {'p90 µs/run':>11}")
    for name, t in samples.items():
        p90 = statistics.quantiles(t, n=10)[-1] * 1e6
        print(f"{name:<12} {medians[name]:>14.1f} {p90:>11.1f}")
    print(
        f"ratio loom_nb / pydantic-ai (median): {medians['loom_nb'] / medians['pydantic-ai']:.2f}"
    )


if __name__ == "__main__":
    main()
