"""frame_tools on a 1,000,000-row frame: the tool vs pandas by hand and DuckDB, same run.

Two queries a data person asks, each timed through the tool and by hand:

- select: open orders above 100, highest total first, 50 rows, with a count of all matches;
- aggregate: orders since a date, grouped by status, count and sum and mean of total, ordered
  by the sum.

"Tool" is ``Tool.call`` as the agent loop runs it: JSON schema validation, the shared query
rules, the filter with values converted to the column dtypes, the pandas work, the copy of the
result, and the bounded text the model gets. "By hand" is the fast pandas for the same
DataFrame, without rendering anything: boolean masks on the needed columns only, ``nlargest``
on the ordering column and then the page's rows (select), or only the needed columns and
``groupby().agg()`` (aggregate). DuckDB runs the same SQL over the same frame (no copy in, one
thread, like pandas) as a second reference. All run on the same frame in one process,
alternating, and the medians are reported with the ratios tool / hand and tool / DuckDB.
Run: ``python -m bench.bench_frames [--rows N] [--runs N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable
from typing import Any


def make_orders(rows: int) -> Any:
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(7)
    return pd.DataFrame(
        {
            "id": np.arange(rows, dtype="int64"),
            "status": pd.Categorical(rng.choice(["open", "paid", "shipped", "cancelled"], rows)),
            "customer": rng.choice([f"c{i:04d}" for i in range(5000)], rows).astype("str"),
            "total": np.round(rng.gamma(2.0, 60.0, rows), 2),
            "created_at": pd.Timestamp("2023-01-01", tz="UTC")
            + pd.to_timedelta(rng.integers(0, 730 * 86400, rows), unit="s"),
        }
    )


SELECT = {
    "table": "orders",
    "filters": [
        {"column": "status", "op": "eq", "value": "open"},
        {"column": "total", "op": "gt", "value": 100},
    ],
    "order": [{"column": "total", "desc": True}],
    "limit": 50,
    "count": True,
}
AGGREGATE = {
    "table": "orders",
    "group_by": ["status"],
    "aggregates": [
        {"fn": "count"},
        {"fn": "sum", "column": "total"},
        {"fn": "mean", "column": "total"},
    ],
    "filters": [{"column": "created_at", "op": "gte", "value": "2024-06-01"}],
    "order": [{"column": "sum_total", "desc": True}],
}


def by_hand_select(df: Any) -> Any:
    import numpy as np
    import pandas as pd

    mask = ((df["status"] == "open") & (df["total"] > 100)).to_numpy()
    count = int(mask.sum())
    rows = np.flatnonzero(mask)  # the matches, then only the ordering column of them
    top = pd.Series(df["total"].to_numpy()[rows]).nlargest(50, keep="first")
    page = df.iloc[rows[top.index.to_numpy()]]
    return page, count


DUCKDB_SELECT = """
SELECT *, count(*) OVER () AS matched FROM orders
WHERE status = 'open' AND total > 100 ORDER BY total DESC LIMIT 50
"""
DUCKDB_AGGREGATE = """
SELECT status, count(*) AS count, sum(total) AS sum_total, avg(total) AS mean_total
FROM orders WHERE created_at >= TIMESTAMPTZ '2024-06-01 00:00:00+00'
GROUP BY status ORDER BY sum_total DESC
"""


def duckdb_runner(df: Any) -> Callable[[str], Any] | None:
    """DuckDB over the very same frame (a replacement scan, no copy), or None without it."""
    try:
        import duckdb
    except ImportError:
        return None
    con = duckdb.connect()
    con.execute("SET threads = 1")
    con.register("orders", df)
    return lambda sql: con.execute(sql).df()


def by_hand_aggregate(df: Any) -> Any:
    import pandas as pd

    since = df.loc[df["created_at"] >= pd.Timestamp("2024-06-01", tz="UTC"), ["status", "total"]]
    out = since.groupby("status", observed=True).agg(
        count=("total", "size"), sum_total=("total", "sum"), mean_total=("total", "mean")
    )
    return out.sort_values("sum_total", ascending=False).reset_index()


def median_ms(fn: Callable[[], Any], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()

    import pandas as pd

    from loom_nb._context import RunContext
    from loom_nb.frames import frame_tools

    df = make_orders(args.rows)
    tools = frame_tools({"orders": df}).tools
    ctx = RunContext("bench", "bench")
    loop = asyncio.new_event_loop()

    def through_tool(name: str, arguments: dict[str, Any]) -> Callable[[], Any]:
        return lambda: loop.run_until_complete(tools[name].call(arguments, ctx))

    # The same answers both ways, checked once before timing.
    page, count = by_hand_select(df)
    out = through_tool("frames_select", SELECT)()
    assert list(out.data["id"]) == list(page["id"]) and f"{count:,} rows match" in out.content
    agg = through_tool("frames_aggregate", AGGREGATE)()
    hand = by_hand_aggregate(df)
    pd.testing.assert_series_equal(
        agg.data["sum_total"], hand["sum_total"], check_names=False, check_index=False
    )

    duck = duckdb_runner(df)
    if duck is not None:
        found = duck(DUCKDB_SELECT)
        # the same totals (ties may come in another order) and the same count
        assert list(found["total"]) == list(page["total"]), "DuckDB found other rows"
        assert int(found["matched"][0]) == count, "DuckDB counted other rows"

    print(f"frame_tools on {len(df):,} rows x {df.shape[1]} columns; median of {args.runs} runs")
    print(
        f"{'query':<11}{'tool ms':>10}{'by hand ms':>12}{'ratio':>8}{'DuckDB ms':>11}{'ratio':>8}"
    )
    for label, name, arguments, hand_fn, sql in [
        ("select", "frames_select", SELECT, by_hand_select, DUCKDB_SELECT),
        ("aggregate", "frames_aggregate", AGGREGATE, by_hand_aggregate, DUCKDB_AGGREGATE),
    ]:
        tool_times, hand_times, duck_times = [], [], []
        for _ in range(args.runs):  # alternate, so all see the same machine state
            tool_times.append(median_ms(through_tool(name, arguments), 1))
            hand_times.append(median_ms(lambda f=hand_fn: f(df), 1))
            if duck is not None:
                duck_times.append(median_ms(lambda q=sql: duck(q), 1))
        t, h = statistics.median(tool_times), statistics.median(hand_times)
        d = statistics.median(duck_times) if duck_times else float("nan")
        print(f"{label:<11}{t:>10.1f}{h:>12.1f}{t / h:>8.2f}{d:>11.1f}{t / d:>8.2f}")
    loop.close()


if __name__ == "__main__":
    main()
