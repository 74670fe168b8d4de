"""Weekly time buckets on a 10,000,000-row frame: frames_aggregate vs the same pandas by hand.

Two questions a data person asks of ``orders`` (the frame of ``bench_frames``, two years of
``created_at`` in UTC), each timed through the tool and by hand:

- open above 100 by week: ``status = 'open' AND total > 100``, grouped by the week of
  ``created_at``, count and sum of ``total`` (the design example);
- every order by week: no filter, count, sum and mean of ``total`` over all rows.

"Tool" is ``Tool.call`` as the agent loop runs it (schema, the shared query rules, the filter,
the buckets, the groups, the copy and the bounded text the model gets). "By hand" is the pandas
a user would write for the same answer, done well: a boolean mask, only the needed columns, each
row's week start as whole weeks since a Monday (``(t - monday).dt.floor("7D") + monday``, the
fastest correct pandas for UTC; ``normalize() - day_of_week`` takes about 4x as long), and one
``groupby().agg()``. The
idiomatic ``pd.Grouper(key="created_at", freq="W-MON")`` is timed too, fewer times, since it
sorts every row first. Both run on the same frame in one process, alternating; medians, and
the ratio tool / by hand. Run: ``python -m bench.bench_buckets [--rows N] [--runs N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
from collections.abc import Callable
from typing import Any

from bench.bench_frames import make_orders, median_ms

OPEN_BY_WEEK: dict[str, Any] = {
    "table": "orders",
    "group_by": [{"column": "created_at", "bucket": "week"}],
    "aggregates": [{"fn": "count"}, {"fn": "sum", "column": "total"}],
    "filters": [
        {"column": "status", "op": "eq", "value": "open"},
        {"column": "total", "op": "gt", "value": 100},
    ],
}
ALL_BY_WEEK: dict[str, Any] = {
    "table": "orders",
    "group_by": [{"column": "created_at", "bucket": "week"}],
    "aggregates": [
        {"fn": "count"},
        {"fn": "sum", "column": "total"},
        {"fn": "mean", "column": "total"},
    ],
}


def _rows(df: Any, filtered: bool) -> Any:
    if filtered:
        return df.loc[(df["status"] == "open") & (df["total"] > 100), ["created_at", "total"]]
    return df[["created_at", "total"]]


def by_hand(df: Any, filtered: bool) -> Any:
    import pandas as pd

    rows = _rows(df, filtered)
    monday = pd.Timestamp("1970-01-05", tz="UTC")
    # Each row's week start: whole weeks since a Monday (exact in UTC, without a DST change).
    week = ((rows["created_at"] - monday).dt.floor("7D") + monday).rename("week_created_at")
    spec = {"count": ("total", "size"), "sum_total": ("total", "sum")}
    if not filtered:
        spec["mean_total"] = ("total", "mean")
    return rows.groupby(week).agg(**spec).reset_index()


def by_grouper(df: Any, filtered: bool) -> Any:
    import pandas as pd

    week = pd.Grouper(key="created_at", freq="W-MON", closed="left", label="left")
    out = _rows(df, filtered).groupby(week)["total"].agg(["size", "sum"])
    return out[out["size"] > 0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--grouper-runs", type=int, default=3)
    args = parser.parse_args()

    import pandas as pd

    from loom_nb._context import RunContext
    from loom_nb.frames import frame_tools

    df = make_orders(args.rows)
    tool = frame_tools({"orders": df}, max_rows=500).tools["frames_aggregate"]
    ctx = RunContext("bench", "bench")
    loop = asyncio.new_event_loop()

    def through_tool(arguments: dict[str, Any]) -> Callable[[], Any]:
        return lambda: loop.run_until_complete(tool.call(arguments, ctx))

    print(f"frames_aggregate on {len(df):,} rows; median of {args.runs} runs")
    print(
        f"{'query':<18}{'groups':>7}{'tool ms':>10}{'by hand ms':>12}{'ratio':>7}{'Grouper ms':>12}"
    )
    queries: list[tuple[str, dict[str, Any], bool]] = [
        ("open >100 by week", OPEN_BY_WEEK, True),
        ("all by week", ALL_BY_WEEK, False),
    ]
    for label, arguments, filtered in queries:
        # The same answer three ways, checked once before timing.
        got = through_tool(arguments)().data
        hand = by_hand(df, filtered)
        pd.testing.assert_frame_equal(got, hand, check_dtype=False)
        grouped = by_grouper(df, filtered)
        pd.testing.assert_series_equal(  # sums in another order: equal to rounding
            grouped["sum"], hand["sum_total"], check_names=False, check_index=False
        )
        tool_times, hand_times = [], []
        for _ in range(args.runs):  # alternate, so both see the same machine state
            tool_times.append(median_ms(through_tool(arguments), 1))
            hand_times.append(median_ms(functools.partial(by_hand, df, filtered), 1))
        grouper = median_ms(functools.partial(by_grouper, df, filtered), args.grouper_runs)
        t, h = statistics.median(tool_times), statistics.median(hand_times)
        print(f"{label:<18}{len(got):>7}{t:>10.1f}{h:>12.1f}{t / h:>7.2f}{grouper:>12.1f}")
    loop.close()


if __name__ == "__main__":
    main()
