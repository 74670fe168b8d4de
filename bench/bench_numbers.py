"""Number tracing on a long thread: what ``check_numbers`` adds to a turn.

A thread of 5,000 messages saved in SQLite (quads of a question, a call, its result, an
answer stating numbers: every other result a 20-row frame, the others JSON), then turns on it,
each a question, one call and an answer with six numbers (one in no result), with
``check_numbers="off"`` and ``"warn"`` in alternation (one agent, the thread kept).
Reported: the median turn of each, their ratio (the goal: under 1.05, tracing adds under
5 %), and the first turns (what one result offers is computed once and kept, so the first
turn after a kernel start pays for the whole thread).

Run: ``python -m bench.bench_numbers [--messages 5000] [--turns 15]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

GOAL = 1.05


def _frame(i: int) -> Any:
    import pandas as pd

    return pd.DataFrame(
        {
            "region": [f"r{j}" for j in range(20)],
            "revenue": [round(1000 + 37.5 * (i + j), 2) for j in range(20)],
            "orders": [10 + (i * 7 + j) % 90 for j in range(20)],
        }
    )


def _thread(messages: int) -> Any:
    from loom_nb import Message, TextPart, Thread, ToolCall, ToolResult
    from loom_nb._render import frame_for_model

    thread = Thread(id="bench-numbers", agent="analyst")
    for i in range(messages // 4):
        call = ToolCall(f"call_{i}", "sales", {"week": i})
        if i % 2:
            df = _frame(i)
            result = ToolResult(call.id, "sales", frame_for_model(df), df)
            total, best = df.revenue.sum(), df.revenue.max()
            said = f"Revenue was {total:,.2f} over {len(df)} regions; best {best:,.2f}."
        else:
            content = json.dumps({"week": i, "total": 1234.5 + i, "orders": 40 + i % 17})
            result = ToolResult(call.id, "sales", content)
            said = f"Week {i}: {1234.5 + i:,.1f} from {40 + i % 17} orders."
        thread.messages += [
            Message.user(f"How did week {i} go?"),
            Message("assistant", [call]),
            Message("tool", [result]),
            Message("assistant", [TextPart(said)]),
        ]
    return thread


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--turns", type=int, default=15)
    args = parser.parse_args()

    from loom_nb import ReplayModel, Reply, define_agent, tool
    from loom_nb.sqlite import sqlite_store

    @tool
    def sales(week: int) -> Any:
        """Sales of a week, by region.

        Args:
            week: the week number.
        """
        return _frame(week)

    answer = (
        "Revenue was $37,875.00 across 20 regions, $1,893.75 a region on average; the best "
        "made $2,606.25, 12.5% more than the worst, and next week looks like $41,000."
    )
    with tempfile.TemporaryDirectory() as tmp:
        store = sqlite_store(Path(tmp) / "loom.db")
        thread = _thread(args.messages)
        messages, thread.messages = thread.messages, []
        store.save_thread(thread)
        for message in messages:
            store.append(thread, message)
        model = ReplayModel([])
        agent = define_agent(name="analyst", model=model, tools=[sales], store=store)
        times: dict[str, list[float]] = {"off": [], "warn": []}
        first: dict[str, float] = {}
        for turn in range(args.turns + 1):
            for mode in ("off", "warn") if turn % 2 else ("warn", "off"):
                agent.check_numbers = mode  # read when a run starts; the thread stays kept
                model.add(Reply("", [("sales", {"week": 3})]), answer)
                start = time.perf_counter()
                result = agent.run_sync("And this week?", thread_id=thread.id)
                took = time.perf_counter() - start
                assert result.status == "complete", result.error
                if turn == 0:
                    first[mode] = took  # "warn" first: it reads every result's numbers
                else:
                    times[mode].append(took)
        n = len(result.thread.messages)
    off, warn = statistics.median(times["off"]), statistics.median(times["warn"])
    ratio = warn / off
    print(f"thread of {n} messages (SQLite), {args.turns} turns each, medians:")
    print(f"  check_numbers='off'   {off * 1000:8.1f} ms a turn")
    print(f"  check_numbers='warn'  {warn * 1000:8.1f} ms a turn")
    print(f"  ratio warn / off (median): {ratio:.3f}  (goal: under {GOAL})")
    print(
        f"  first turns: warn {first['warn'] * 1000:.0f} ms (the thread loaded, every "
        f"result's numbers read), then off {first['off'] * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
