"""The aggregate tool: groups, functions, order, paging, and what it refuses."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from loom_nb.frames import frame_tools
from tests.frames._orders import call, flt, refused


async def test_group_by_with_every_function(conn):
    out = await call(
        conn,
        "frames_aggregate",
        {
            "table": "orders",
            "group_by": ["segment"],
            "aggregates": [
                {"fn": "count"},
                {"fn": "count", "column": "qty"},
                {"fn": "sum", "column": "total"},
                {"fn": "mean", "column": "qty"},
                {"fn": "min", "column": "created_at"},
                {"fn": "max", "column": "priority"},
            ],
        },
    )
    df = out.data
    assert list(df.columns) == [
        "segment",
        "count",
        "count_qty",
        "sum_total",
        "mean_qty",
        "min_created_at",
        "max_priority",
    ]
    assert list(df["segment"].astype(object).where(df["segment"].notna(), None)) == [
        "retail",
        "wholesale",
        None,  # missing keys form their own group, last
    ]
    assert list(df["count"]) == [5, 2, 1]
    assert list(df["count_qty"]) == [5, 0, 1]
    assert list(df["sum_total"]) == [1365.5, 250.5, 99.9]
    assert df["mean_qty"][0] == 4.8 and pd.isna(df["mean_qty"][1]) and df["mean_qty"][2] == 4
    assert list(df["min_created_at"]) == list(
        pd.to_datetime(["2024-01-01T09:00Z", "2024-01-02T09:00Z", "2024-01-04T09:00Z"])
    )
    assert list(df["max_priority"]) == ["high", "high", "high"]
    assert (out.content or "").startswith("3 groups match.")


async def test_count_distinct_and_median_ignore_missing_values(conn):
    out = await call(
        conn,
        "frames_aggregate",
        {
            "table": "orders",
            "group_by": ["paid"],
            "aggregates": [
                {"fn": "count_distinct", "column": "segment"},
                {"fn": "count_distinct", "column": "status"},
                {"fn": "median", "column": "total"},
                {"fn": "median", "column": "qty"},
                {"fn": "median", "column": "created_at"},
            ],
        },
    )
    df = out.data
    assert list(df["paid"]) == [False, True]
    assert list(df["count_distinct_segment"]) == [2, 2]  # {wholesale, retail}; None not counted
    assert list(df["count_distinct_status"]) == [2, 3]  # closed, Closed | open, shipped, op_en
    assert list(df["median_total"]) == [250.5, 32.75]  # NaN skipped
    assert list(df["median_qty"]) == [5.5, 4.0]
    assert list(df["median_created_at"]) == [pd.Timestamp("2024-01-04T09:00Z")] * 2
    summary = await call(
        conn,
        "frames_aggregate",
        {
            "table": "orders",
            "filters": [flt("total", "gt", 10**6)],
            "aggregates": [
                {"fn": "count_distinct", "column": "status"},
                {"fn": "median", "column": "total"},
            ],
        },
    )
    assert summary.data["count_distinct_status"][0] == 0  # of no rows, as SQL's count(DISTINCT)
    assert pd.isna(summary.data["median_total"][0])


async def test_order_by_an_aggregate_and_page_the_groups(conn):
    args = {
        "table": "orders",
        "group_by": ["segment"],
        "aggregates": [{"fn": "count"}, {"fn": "sum", "column": "total"}],
    }
    out = await call(conn, "frames_aggregate", {**args, "order": [{"column": "count"}]})
    assert list(out.data["count"]) == [1, 2, 5]
    out = await call(
        conn,
        "frames_aggregate",
        {**args, "order": [{"column": "sum_total", "desc": True}], "limit": 1, "offset": 1},
    )
    assert list(out.data["sum_total"]) == [250.5]


async def test_aggregate_without_groups_is_one_summary_row(conn):
    out = await call(
        conn,
        "frames_aggregate",
        {
            "table": "orders",
            "aggregates": [
                {"fn": "count"},
                {"fn": "sum", "column": "total"},
                {"fn": "min", "column": "shipped_on"},
                {"fn": "max", "column": "status"},
                {"fn": "mean", "column": "paid"},
            ],
        },
    )
    row = out.data.iloc[0]
    assert len(out.data) == 1
    assert row["count"] == 8
    assert row["sum_total"] == pytest.approx(1715.9)
    assert row["min_shipped_on"] == pd.Timestamp("2024-02-01")
    assert row["max_status"] == "shipped"
    assert row["mean_paid"] == 5 / 8
    default = await call(conn, "frames_aggregate", {"table": "orders"})
    assert list(default.data.columns) == ["count"] and default.data["count"][0] == 8


async def test_aggregate_filters_and_sql_like_sums_of_nothing(conn):
    out = await call(
        conn,
        "frames_aggregate",
        {
            "table": "orders",
            "group_by": ["paid"],
            "filters": [flt("segment", "eq", "wholesale")],
            "aggregates": [{"fn": "count"}, {"fn": "sum", "column": "qty"}],
        },
    )
    assert list(out.data["paid"]) == [False, True]
    assert list(out.data["count"]) == [1, 1]
    assert out.data["sum_qty"].isna().all()  # no values to add: missing, not 0


async def test_a_summary_of_no_rows_keeps_the_dtypes_of_a_summary_of_some(conn, orders):
    """ "Total of the orders above 10,000" when there are none: one row of missing values in
    the columns' own dtypes (a tz-aware minimum stays tz-aware, a sum of Int64 stays Int64),
    the dtypes the same question gets when rows match, and those of a grouped summary. (A
    numpy int or bool column's sum of nothing is NaN, a float, as pandas has it.)"""
    aggregates = [
        {"fn": "count"},
        {"fn": "sum", "column": "qty"},
        {"fn": "mean", "column": "qty"},
        {"fn": "median", "column": "qty"},
        {"fn": "min", "column": "created_at"},
        {"fn": "max", "column": "shipped_on"},
        {"fn": "count_distinct", "column": "status"},
        {"fn": "max", "column": "priority"},
    ]
    args = {"table": "orders", "aggregates": aggregates}
    none = await call(conn, "frames_aggregate", {**args, "filters": [flt("total", "gt", 10_000)]})
    some = await call(conn, "frames_aggregate", {**args, "filters": [flt("total", "gt", 100)]})
    grouped = await call(conn, "frames_aggregate", {**args, "group_by": ["paid"]})
    dtypes = dict(some.data.dtypes.astype(str))
    assert dict(none.data.dtypes.astype(str)) == dtypes
    assert {k: str(v) for k, v in grouped.data.dtypes.items() if k != "paid"} == dtypes
    assert dtypes["min_created_at"] == str(orders["created_at"].dtype)  # its time zone kept
    assert dtypes["sum_qty"] == "Int64" and dtypes["max_priority"] == "category"
    row = none.data.iloc[0]
    assert row["count"] == 0 and row["count_distinct_status"] == 0
    assert none.data.drop(columns=["count", "count_distinct_status"]).isna().all(axis=None)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            {"aggregates": [{"fn": "sum", "column": "status"}]},
            "sum needs a numeric column; orders.status is str",
        ),
        ({"aggregates": [{"fn": "mean", "column": "segment"}]}, "mean needs a numeric column"),
        (
            {"aggregates": [{"fn": "min", "column": "segment"}]},
            "orders.segment is an unordered category, so it has no min",
        ),
        ({"aggregates": [{"fn": "sum"}]}, "sum needs a column"),
        ({"aggregates": [{"fn": "mode", "column": "total"}]}, "is not one of"),
        (
            {"aggregates": [{"fn": "median", "column": "status"}]},
            "median needs a numeric column; orders.status is str. Use count, count_distinct",
        ),
        (
            {"group_by": ["segment"], "order": [{"column": "sum_total"}]},
            "'sum_total' is not an output column; use one of ['count', 'segment']",
        ),
        ({"group_by": ["nope"]}, "'orders' has no column 'nope'"),
        (
            {"group_by": ["count"], "aggregates": [{"fn": "count"}]},
            "aggregates[0] would be named 'count', like a group_by column",
        ),
    ],
)
async def test_bad_aggregates_are_explained(conn, args, message):
    await refused(conn, "frames_aggregate", {"table": "orders", **args}, re.escape(message))


async def test_a_group_pandas_cannot_make_is_explained_to_the_model():
    conn = frame_tools({"readings": pd.DataFrame({"v": np.array([1, 2, 2], dtype="float16")})})
    args = {"table": "readings", "group_by": ["v"]}
    await refused(conn, "frames_aggregate", args, "cannot aggregate readings: float16")
