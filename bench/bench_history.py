"""A long paging exploration: what the model is sent over the session, and the wall time.

One prompt, then N model turns that each read the next 50 rows of a table (a data block of
about 1,000 tokens), then an answer. Measured for N = 50 and 200: the total input tokens over
the session and of the last request (loom_nb's stated estimate, characters / 3, for every
row), and the wall time of the whole run, for

- loom_nb with history by reference (``model_settings={"history_tokens": B}``);
- loom_nb sending every result whole (a budget larger than the session: the old behaviour);
- pydantic-ai with a history processor (``history_processors=``; in pydantic-ai 2 the
  ``ProcessHistory`` capability) doing the same trimming: the oldest tool returns replaced by
  a reference line until the history fits B. pydantic-ai keeps the trimmed history as the
  run's messages; loom_nb's store and the user's view keep every result.

Run: ``python -m bench.bench_history [--turns 50 200] [--budget 8000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable
from typing import Any

from loom_nb._render import frame_for_model
from loom_nb._tokens import ESTIMATE


def rows(offset: int) -> Any:
    import pandas as pd

    ids = range(offset, offset + 50)
    return pd.DataFrame(
        {
            "id": list(ids),
            "customer": [f"customer {i} ltd" for i in ids],
            "total": [round(i * 1.37, 2) for i in ids],
            "status": ["paid" if i % 3 else "open" for i in ids],
        }
    )


def loom(turns: int, budget: int) -> tuple[int, int, float]:
    from loom_nb import FunctionModel, Reply, define_agent, memory_store, tool

    sizes: list[int] = []

    def script(request: Any) -> Reply | str:
        sizes.append(sum(ESTIMATE.message(m) for m in request.messages))
        n = len(sizes)
        if n > turns:
            return "done"
        return Reply("", [("page", {"offset": 50 * n})])

    def page(offset: int) -> Any:
        """Read 50 rows from ``offset``.

        Args:
            offset: rows to skip.
        """
        return rows(offset)

    agent = define_agent(
        name="bench",
        model=FunctionModel(script),
        tools=[tool(page)],
        store=memory_store(),
        max_steps=turns + 5,
        model_settings={"history_tokens": budget},
    )
    start = time.perf_counter()
    result = agent.run_sync("Page through the orders.")
    elapsed = time.perf_counter() - start
    assert result.output == "done", result.status
    return sum(sizes), sizes[-1], elapsed


def pydantic_ai(turns: int, budget: int) -> tuple[int, int, float]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    sizes: list[int] = []

    def size(part: Any) -> int:
        if isinstance(part, (TextPart, UserPromptPart)):
            return ESTIMATE.count(str(part.content))
        if isinstance(part, ToolCallPart):
            return ESTIMATE.count(part.tool_call_id + part.tool_name + part.args_as_json_str())
        if isinstance(part, ToolReturnPart):
            return ESTIMATE.count(part.tool_call_id + str(part.content))
        return 0

    def trim(messages: list[Any]) -> list[Any]:  # annotations pydantic-ai resolves at run time
        total = sum(4 + sum(size(p) for p in m.parts) for m in messages)
        out: list[Any] = []
        for m in messages:
            if total > budget and isinstance(m, ModelRequest) and m is not messages[-1]:
                parts = []
                for p in m.parts:
                    if isinstance(p, ToolReturnPart) and total > budget:
                        line = f"[kept result] call {p.tool_call_id}: {p.tool_name}; recall it"
                        new = ToolReturnPart(p.tool_name, line, p.tool_call_id)
                        total -= size(p) - size(new)
                        parts.append(new)
                    else:
                        parts.append(p)
                m = ModelRequest(parts=parts)
            out.append(m)
        return out

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sizes.append(sum(4 + sum(size(p) for p in m.parts) for m in messages))
        n = len(sizes)
        if n > turns:
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart("page", {"offset": 50 * n})])

    try:  # pydantic-ai 2: a history processor is a capability
        from pydantic_ai.capabilities.process_history import ProcessHistory

        agent = Agent(FunctionModel(model), capabilities=[ProcessHistory(trim)])
    except ImportError:
        agent = Agent(FunctionModel(model), history_processors=[trim])  # type: ignore[call-arg]

    @agent.tool_plain
    def page(offset: int) -> str:
        """Read 50 rows from ``offset``."""
        return frame_for_model(rows(offset))

    from pydantic_ai.usage import UsageLimits

    start = time.perf_counter()
    result = asyncio.run(
        agent.run("Page through the orders.", usage_limits=UsageLimits(request_limit=turns + 5))
    )
    elapsed = time.perf_counter() - start
    assert result.output == "done"
    return sum(sizes), sizes[-1], elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, nargs="+", default=[50, 200])
    parser.add_argument("--budget", type=int, default=8_000)
    args = parser.parse_args()
    runs: list[tuple[str, Callable[[int], tuple[int, int, float]]]] = [
        ("loom_nb, history by reference", lambda n: loom(n, args.budget)),
        ("loom_nb, every result whole", lambda n: loom(n, 10**9)),
        ("pydantic-ai, history_processors", lambda n: pydantic_ai(n, args.budget)),
    ]
    print(f"history budget {args.budget:,} tokens (estimate: characters / 3)")
    print(f"{'turns':>5}  {'run':<34} {'input tokens':>14} {'last request':>13} {'wall s':>8}")
    for turns in args.turns:
        totals = []
        for name, run in runs:
            total, last, elapsed = run(turns)
            totals.append(total)
            print(f"{turns:>5}  {name:<34} {total:>14,} {last:>13,} {elapsed:>8.2f}")
        print(
            f"{turns:>5}  ratio whole / by reference (input tokens): x{totals[1] / totals[0]:.1f}"
        )


if __name__ == "__main__":
    main()
