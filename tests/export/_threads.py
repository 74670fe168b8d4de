"""Random scripted threads over the orders frame: selects and aggregates with random filters,
orders, pages and columns (some refused by the tools, as a model's calls sometimes are), and
writes the user rejects. ``run_thread`` plays one through an agent."""

from __future__ import annotations

import random
from typing import Any

import pandas as pd

from loom_nb import Agent, ReplayModel, Reply, RunResult, Thread, define_agent
from loom_nb._store import Store
from loom_nb.frames import frame_tools
from tests.frames._orders import orders_frame

COLUMNS = list(orders_frame().columns)
VALUES: list[Any] = [
    "open",
    "closed",
    "retail",
    "mid",
    "high",
    "2024-01-03",
    "2024-01-04T09:00:00+00:00",
    "2024-02-04",
    True,
    False,
    0,
    4,
    55.5,
    100,
    250,
    "4",
]
PATTERNS = ["op%", "%en", "%pe%", "open", "o_en", "%", "%losed", "C%"]
OPS = ["eq", "neq", "gt", "gte", "lt", "lte", "like", "ilike", "in", "is_null"]


def a_filter(rng: random.Random) -> dict[str, Any]:
    op = rng.choice(OPS)
    f: dict[str, Any] = {"column": rng.choice(COLUMNS), "op": op}
    if op in ("like", "ilike"):
        f["value"] = rng.choice(PATTERNS)
    elif op == "in":
        f["value"] = rng.sample(VALUES, rng.randint(1, 3))
    elif op != "is_null":
        f["value"] = rng.choice(VALUES)
    if rng.random() < 0.25:
        f["not"] = True
    return f


def a_select(rng: random.Random) -> dict[str, Any]:
    args: dict[str, Any] = {
        "table": "orders",
        "filters": [a_filter(rng) for _ in range(rng.randint(0, 2))],
    }
    if rng.random() < 0.5:
        args["columns"] = rng.sample(COLUMNS, rng.randint(1, 4))
    if rng.random() < 0.6:
        args["order"] = [
            {"column": rng.choice(COLUMNS), "desc": rng.random() < 0.5}
            for _ in range(rng.randint(1, 2))
        ]
    if rng.random() < 0.5:
        args["limit"] = rng.randint(0, 6)
    if rng.random() < 0.3:
        args["offset"] = rng.randint(0, 5)
    return args


def an_aggregate(rng: random.Random) -> dict[str, Any]:
    aggregates = [{"fn": "count"}]
    for _ in range(rng.randint(0, 2)):
        aggregates.append(
            {
                "fn": rng.choice(["sum", "mean", "min", "max", "count"]),
                "column": rng.choice(["total", "qty", "id", "created_at", "priority"]),
            }
        )
    args: dict[str, Any] = {
        "table": "orders",
        "group_by": rng.sample(["status", "segment", "priority", "paid"], rng.randint(0, 2)),
        "aggregates": aggregates,
        "filters": [a_filter(rng) for _ in range(rng.randint(0, 1))],
    }
    if rng.random() < 0.4:
        args["order"] = [{"column": "count", "desc": True}]
    if rng.random() < 0.3:
        args["limit"] = rng.randint(1, 4)
    return args


def an_update(rng: random.Random) -> dict[str, Any]:
    return {
        "table": "orders",
        "values": {"status": "flagged"},
        "filters": [{"column": "id", "op": "eq", "value": rng.randint(1, 8)}],
    }


def script(seed: int, calls: int = 8) -> list[Reply | str]:
    """Replies of a model that makes ``calls`` calls over a few turns, then answers."""
    rng = random.Random(seed)
    replies: list[Reply | str] = []
    made = 0
    while made < calls:
        batch = []
        for _ in range(min(rng.randint(1, 3), calls - made)):
            kind = rng.random()
            if kind < 0.55:
                batch.append(("frames_select", a_select(rng)))
            elif kind < 0.9:
                batch.append(("frames_aggregate", an_aggregate(rng)))
            else:
                batch.append(("frames_update", an_update(rng)))
            made += 1
        replies.append(Reply(f"Step {len(replies) + 1}: looking.", batch))
    replies.append("That is what I found.")
    return replies


def agent_for(
    replies: list[Reply | str], orders: pd.DataFrame, store: Store | None = None
) -> Agent:
    tools = frame_tools({"orders": {"frame": orders, "write": True}}, max_rows=6)
    return define_agent(name="analyst", model=ReplayModel(replies), connectors=[tools], store=store)


def run_thread(agent: Agent, prompt: str = "Explore the orders.") -> RunResult:
    """Run to the end, rejecting every write (so the frame stays as it was)."""
    result = agent.run_sync(prompt)
    while result.status == "awaiting_approval":
        result = agent.resume_sync(result.thread_id, {p.call_id: False for p in result.pending})
    return result


def frames_by_variable(thread: Thread) -> dict[str, pd.DataFrame]:
    """``result_N`` (N counts the thread's calls from 1) -> the DataFrame of a read call."""
    calls = [c for m in thread.messages for c in m.tool_calls]
    results = {r.call_id: r for r in thread.tool_results()}
    out = {}
    for n, call in enumerate(calls, start=1):
        result = results.get(call.id)
        if call.name in ("frames_select", "frames_aggregate") and result and not result.is_error:
            out[f"result_{n}"] = result.data
    return out
