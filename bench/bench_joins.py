"""A join and a percentile through frame_tools at 1,000,000 rows (``--rows 10000000`` for 10M):
the tool vs pandas by hand and DuckDB over the same frames, same run.

Two questions a data person asks:

- "join + p90": revenue and the 90th percentile of the order total by customer tier, the
  orders joined to their customers along ``orders.customer_id = customers.id``;
- "p90 by status": the 90th percentile and the standard deviation of the total by status, one
  table.

"Tool" is ``Tool.call`` as the agent loop runs it: the schema, the shared grammar, the
relationship checks, the merge on the declared keys (only the columns the call names), the
groupby, the copy of the result and the bounded text the model gets. "By hand" is the pandas a
person writes: ``merge`` on the needed columns, then ``groupby().agg()`` with ``quantile``.
DuckDB runs the same SQL (``quantile_cont``, ``stddev_samp``) over the same frames (no copy
in), one thread like pandas. Medians of ``--runs``, alternating. Run:
``python -m bench.bench_joins [--rows N] [--runs N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from collections.abc import Callable
from typing import Any

from bench.bench_frames import median_ms

JOIN = {
    "table": "orders",
    "join": ["customers"],
    "group_by": ["customers.tier"],
    "aggregates": [
        {"fn": "sum", "column": "total"},
        {"fn": "percentile", "column": "total", "p": 0.9},
    ],
}
PERCENTILE = {
    "table": "orders",
    "group_by": ["status"],
    "aggregates": [
        {"fn": "percentile", "column": "total", "p": 0.9},
        {"fn": "std", "column": "total"},
    ],
}
DUCKDB_JOIN = """
SELECT c.tier AS "customers.tier", sum(o.total) AS sum_total,
       quantile_cont(o.total, 0.9) AS p90_total
FROM orders o LEFT JOIN customers c ON c.id = o.customer_id
GROUP BY c.tier ORDER BY c.tier NULLS LAST
"""
DUCKDB_PERCENTILE = """
SELECT status, quantile_cont(total, 0.9) AS p90_total, stddev_samp(total) AS std_total
FROM orders GROUP BY status ORDER BY status
"""


def make_frames(rows: int) -> tuple[Any, Any]:
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(7)
    n_customers = max(rows // 20, 10)
    customers = pd.DataFrame(
        {
            "id": np.arange(1, n_customers + 1, dtype="int64"),
            "tier": rng.choice(["basic", "plus", "gold"], n_customers),
            "region": rng.choice(["north", "south", "east", "west"], n_customers),
        }
    )
    orders = pd.DataFrame(
        {
            "id": np.arange(rows, dtype="int64"),
            # a few orders of customers that are not in the table: they have no match
            "customer_id": rng.integers(1, n_customers + n_customers // 50 + 2, rows),
            "status": rng.choice(["open", "paid", "shipped", "cancelled"], rows),
            "total": np.round(rng.gamma(2.0, 60.0, rows), 2),
        }
    )
    return orders, customers


def by_hand_join(orders: Any, customers: Any) -> Any:
    merged = orders[["customer_id", "total"]].merge(
        customers[["id", "tier"]], how="left", left_on="customer_id", right_on="id"
    )
    import pandas as pd

    grouped = merged.groupby("tier", dropna=False)["total"]
    return pd.DataFrame(
        {"sum_total": grouped.sum(), "p90_total": grouped.quantile(0.9)}
    ).reset_index()


def by_hand_percentile(orders: Any) -> Any:
    import pandas as pd

    grouped = orders.groupby("status")["total"]
    return pd.DataFrame(
        {"p90_total": grouped.quantile(0.9), "std_total": grouped.std()}
    ).reset_index()


def duckdb_runner(orders: Any, customers: Any) -> Callable[[str], Any] | None:
    try:
        import duckdb
    except ImportError:
        return None
    con = duckdb.connect()
    con.execute("SET threads = 1")
    con.register("orders", orders)
    con.register("customers", customers)
    return lambda sql: con.execute(sql).df()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()

    import numpy as np

    from loom_nb._context import RunContext
    from loom_nb.frames import frame_tools

    orders, customers = make_frames(args.rows)
    tools = frame_tools(
        {"orders": orders, "customers": customers},
        relationships={"orders.customer_id": "customers.id"},
    ).tools
    ctx = RunContext("bench", "bench")
    loop = asyncio.new_event_loop()

    def through_tool(arguments: dict[str, Any]) -> Callable[[], Any]:
        return lambda: loop.run_until_complete(tools["frames_aggregate"].call(arguments, ctx))

    duck = duckdb_runner(orders, customers)
    # The same answers every way, checked once before timing.
    tool_join = through_tool(JOIN)().data
    hand_join = by_hand_join(orders, customers)
    np.testing.assert_allclose(tool_join["p90_total"], hand_join["p90_total"])
    np.testing.assert_allclose(tool_join["sum_total"], hand_join["sum_total"])
    tool_p90 = through_tool(PERCENTILE)().data
    np.testing.assert_allclose(tool_p90["p90_total"], by_hand_percentile(orders)["p90_total"])
    if duck is not None:
        np.testing.assert_allclose(tool_join["p90_total"], duck(DUCKDB_JOIN)["p90_total"])
        np.testing.assert_allclose(tool_p90["std_total"], duck(DUCKDB_PERCENTILE)["std_total"])

    cases = [
        ("join + p90", through_tool(JOIN), lambda: by_hand_join(orders, customers), DUCKDB_JOIN),
        (
            "p90 by status",
            through_tool(PERCENTILE),
            lambda: by_hand_percentile(orders),
            DUCKDB_PERCENTILE,
        ),
    ]
    print(f"{args.rows:,} orders, {len(customers):,} customers, medians of {args.runs} runs")
    print(f"{'query':<15} {'tool ms':>9} {'hand ms':>9} {'DuckDB ms':>10}  tool/hand  tool/DuckDB")
    for name, tool, hand, sql in cases:
        t_tool, t_hand, t_duck = [], [], []
        for _ in range(args.runs):  # alternating, so the machine's noise falls on all alike
            t_tool.append(median_ms(tool, 1))
            t_hand.append(median_ms(hand, 1))
            if duck is not None:
                t_duck.append(median_ms(lambda sql=sql: duck(sql), 1))
        m_tool, m_hand = statistics.median(t_tool), statistics.median(t_hand)
        m_duck = statistics.median(t_duck) if t_duck else float("nan")
        print(
            f"{name:<15} {m_tool:>9.1f} {m_hand:>9.1f} {m_duck:>10.1f}  "
            f"x{m_tool / m_hand:>8.2f}  x{m_tool / m_duck:>10.2f}"
        )


if __name__ == "__main__":
    main()
