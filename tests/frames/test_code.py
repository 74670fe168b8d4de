"""The pandas code of a frames call gives the very DataFrame the tool returned: random calls
over a frame of every dtype, each tool result compared with its code's (``assert_frame_equal``)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pandas.testing import assert_frame_equal

from loom_nb._code import CodeContext, call_words
from loom_nb._messages import ToolCall
from loom_nb._tables.grammar import BUCKETS, OPERATORS
from loom_nb._tools import Connector, ToolInputError, to_output
from loom_nb.frames import frame_tools
from loom_nb.frames._aggregate import AGGREGATE_FUNCTIONS
from tests.frames._orders import open_orders_over, orders_frame
from tests.frames.test_buckets import AGGREGATES, BUCKETED
from tests.frames.test_buckets import frame as events_frame


def frame() -> pd.DataFrame:
    df = orders_frame()
    df["note"] = pd.Series(["a'b", None, 'q"x', "", "Ab%", "a\nb", "ß", "open"], dtype=object)
    df["code"] = pd.array(["x1", None, "x2", "y_", "x1", "Y", None, "x%"], dtype="string")
    df["wait"] = pd.to_timedelta(["1 days", None, "2h", "3h", "-1h", "0s", "5m", "1 days"])
    df.index = pd.Index([10, 11, 12, 13, 14, 15, 16, 17])  # labels that are not positions
    return df


FRAME = frame()
CONN = frame_tools({"orders": FRAME}, max_rows=5)
COLUMNS = list(FRAME.columns)
values = st.one_of(
    st.sampled_from(
        [
            "open",
            "Open",
            "retail",
            "mid",
            "high",
            "x1",
            "2024-01-03",
            "2024-01-03T09:00:00+05:00",
            "2024-02-04",
            "2 hours",
            "1 days",
            "true",
            "4",
            "ß",
            "a'b",
            'q"x',
        ]
    ),
    st.integers(-2, 300),
    st.floats(-10, 2000, allow_nan=False),
    st.booleans(),
)
patterns = st.sampled_from(
    ["op%", "%en", "%pe%", "open", "o_en", "%", "a%b", "%\\%", "x_", "%'%", "A%", "%a%b%", "ß"]
)


@st.composite
def filters(draw: Any) -> dict[str, Any]:
    column = draw(st.sampled_from(COLUMNS))
    op = draw(st.sampled_from(OPERATORS))
    f: dict[str, Any] = {"column": column, "op": op}
    if op in ("like", "ilike"):
        f["value"] = draw(patterns)
    elif op == "in":
        f["value"] = draw(st.lists(values, min_size=1, max_size=3))
    elif op != "is_null":
        f["value"] = draw(values)
    if draw(st.booleans()):
        f["not"] = True
    return f


orders = st.lists(
    st.fixed_dictionaries({"column": st.sampled_from(COLUMNS)}, optional={"desc": st.booleans()}),
    max_size=3,
)
select_args = st.fixed_dictionaries(
    {"table": st.just("orders")},
    optional={
        "columns": st.lists(st.sampled_from(COLUMNS), min_size=1, max_size=4),
        "filters": st.lists(filters(), max_size=3),
        "order": orders,
        "limit": st.integers(0, 8),
        "offset": st.integers(0, 9),
    },
)
#: group_by entries: columns, and time buckets of the datetime columns (one tz-aware, one not).
group_keys = st.one_of(
    st.sampled_from(COLUMNS),
    st.fixed_dictionaries(
        {
            "column": st.sampled_from(["created_at", "shipped_on"]),
            "bucket": st.sampled_from(BUCKETS),
        }
    ),
    st.fixed_dictionaries(  # bins: a number of them, or edges (numeric columns only)
        {
            "column": st.sampled_from(COLUMNS),
            "bins": st.one_of(st.integers(1, 6), st.just([0, 10.5, 100, 1000])),
        }
    ),
)
aggregate_args = st.fixed_dictionaries(
    {"table": st.just("orders")},
    optional={
        "group_by": st.lists(group_keys, max_size=2),
        "aggregates": st.lists(
            st.fixed_dictionaries(
                {"fn": st.sampled_from(AGGREGATE_FUNCTIONS)},
                optional={
                    "column": st.sampled_from(COLUMNS),
                    "p": st.sampled_from([0, 0.5, 0.9, 0.999, 1]),
                },
            ),
            max_size=3,
        ),
        "filters": st.lists(filters(), max_size=2),
        "limit": st.integers(0, 8),
        "offset": st.integers(0, 3),
    },
)


def tool_frame(conn: Connector, name: str, args: dict[str, Any]) -> pd.DataFrame | None:
    tool = conn.tools[name]
    try:
        positional, keywords = tool.validate(args)
        data = to_output(tool.function(*positional, **keywords)).data
    except ToolInputError:
        return None
    assert isinstance(data, pd.DataFrame)
    return data


def code_frame(
    conn: Connector, name: str, args: dict[str, Any], df: pd.DataFrame, table: str = "orders"
) -> Any:
    hook = conn.tools[name].code
    assert hook is not None
    ctx = CodeContext("result_1")
    source = hook(args, ctx)
    assert source is not None
    assert set(ctx.expected) == {table}
    namespace: dict[str, Any] = {table: df.copy()}
    exec("\n\n".join([*ctx.setups, source]), namespace)
    return namespace["result_1"], source


def same(
    conn: Connector,
    name: str,
    args: dict[str, Any],
    df: pd.DataFrame = FRAME,
    table: str = "orders",
) -> bool:
    expected = tool_frame(conn, name, args)
    if expected is None:
        return False
    got, source = code_frame(conn, name, args, df, table)
    try:
        assert_frame_equal(got, expected)
    except AssertionError as exc:
        raise AssertionError(f"{args}\n{source}") from exc
    return True


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(select_args)
def test_select_code_gives_the_tools_frame(args: dict[str, Any]) -> None:
    assume(same(CONN, "frames_select", args))  # too many refused calls fail the health check


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(aggregate_args)
def test_aggregate_code_gives_the_tools_frame(args: dict[str, Any]) -> None:
    assume(same(CONN, "frames_aggregate", args))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    *BUCKETED,
    st.lists(st.sampled_from(AGGREGATES), min_size=1, max_size=4),
    st.one_of(st.none(), st.integers(-500, 500)),
)
def test_bucketed_aggregate_code_gives_the_tools_frame(
    data: Any,
    tz: str | None,
    unit: str,
    bucket: str,
    by_k: bool,
    aggregates: list[dict[str, str]],
    above: int | None,
) -> None:
    """Random timestamps in time zones with summer time, skipped and repeated midnights and
    NaT, in every unit: the code's buckets are the tool's."""
    df = events_frame(data, tz, unit)
    conn = frame_tools({"events": df}, max_rows=1000)
    args: dict[str, Any] = {
        "table": "events",
        "group_by": [{"column": "t", "bucket": bucket}, *(["k"] if by_k else [])],
        "aggregates": aggregates,
        "order": [{"column": f"{bucket}_t", "desc": True}] if by_k else [],
    }
    if above is not None:
        args["filters"] = [{"column": "v", "op": "gt", "value": above}]
    assert same(conn, "frames_aggregate", args, df, "events")


@pytest.mark.parametrize("above", [10_000, 100])
def test_a_summary_row_in_code_is_the_tools_over_no_rows_too(above: int) -> None:
    args = {
        "table": "orders",
        "filters": [{"column": "total", "op": "gt", "value": above}],
        "aggregates": [
            {"fn": fn, "column": column}
            for fn, column in [
                ("sum", "qty"),
                ("median", "qty"),
                ("min", "created_at"),
                ("max", "priority"),
                ("count_distinct", "code"),
                ("mean", "wait"),
            ]
        ],
    }
    assert same(CONN, "frames_aggregate", args)


def test_a_bucket_reads_as_its_start_in_words_and_code() -> None:
    conn = frame_tools({"orders": orders_frame()})
    args = {
        "table": "orders",
        "group_by": [{"column": "created_at", "bucket": "week"}],
        "aggregates": [{"fn": "sum", "column": "total"}, {"fn": "median", "column": "total"}],
        "filters": [{"column": "status", "op": "eq", "value": "open"}],
    }
    call = ToolCall("c1", "frames_aggregate", args)
    assert call_words(call, conn.tools["frames_aggregate"]) == (
        "frames_aggregate · orders · sum(total), median(total) by week of created_at · "
        "status = 'open'"
    )
    hook = conn.tools["frames_aggregate"].code
    assert hook is not None
    ctx = CodeContext()
    assert hook(args, ctx) == (
        'matched = orders[(orders["status"] == "open")]\n'
        'week_created_at = bucket_start(matched["created_at"], "week")\n'
        "groups = matched.groupby([week_created_at], dropna=False, observed=True, sort=True)\n"
        "result = (\n"
        '    pd.DataFrame({"sum_total": groups["total"].sum(min_count=1), '
        '"median_total": groups["total"].median()}).reset_index()\n'
        "    .head(10000)\n"
        "    .reset_index(drop=True)\n)"
    )
    assert ctx.setups[:3] == ["import pandas as pd", "from typing import Any", "import numpy as np"]
    # the tool's own module, as source: bucket_start and the localize_starts the tool uses
    assert ctx.setups[3].startswith("def bucket_start(timestamps: pd.Series, bucket: str)")
    assert "\n\n\ndef localize_starts(labels: pd.Series, dtype: Any)" in ctx.setups[3]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            open_orders_over(100, limit=50),
            "result = (\n"
            '    orders[(orders["status"] == "open") & (orders["total"] > 100)]\n'
            '    .sort_values("total", ascending=False, na_position="last", kind="stable")\n'
            "    .head(50)\n)",
        ),
        (
            {
                "table": "orders",
                "columns": ["id", "total"],
                "filters": [{"column": "status", "op": "neq", "value": "open"}],
            },
            "result = (\n"
            '    orders[(orders["status"] != "open") & orders["status"].notna()]\n'
            "    .head(100)\n"
            '    [["id", "total"]]\n)',
        ),
    ],
)
def test_the_code_reads_like_pandas_a_person_writes(args: dict[str, Any], expected: str) -> None:
    # The code gives the user's frame: the model's limit (50), else up to frame_rows (100).
    conn = frame_tools({"orders": orders_frame()}, max_rows=5, frame_rows=100)
    hook = conn.tools["frames_select"].code
    assert hook is not None
    assert hook(args, CodeContext()) == expected


def test_a_call_reads_as_the_query_in_words() -> None:
    args = open_orders_over(100, limit=50)
    conn = frame_tools({"orders": orders_frame()})
    call = ToolCall("c1", "frames_select", args)
    assert call_words(call, conn.tools["frames_select"]) == (
        "frames_select · orders · status = 'open' AND total > 100 · order by total desc · limit 50"
    )
    aggregate = ToolCall(
        "c2",
        "frames_aggregate",
        {
            "table": "orders",
            "group_by": ["status"],
            "aggregates": [{"fn": "count"}, {"fn": "sum", "column": "total"}],
            "filters": [{"column": "paid", "op": "eq", "value": True}],
        },
    )
    assert call_words(aggregate, conn.tools["frames_aggregate"]) == (
        "frames_aggregate · orders · count, sum(total) by status · paid = TRUE"
    )
    listing = ToolCall("c3", "frames_list_tables", {})
    assert call_words(listing, conn.tools["frames_list_tables"]) == "frames_list_tables()"
    broken = ToolCall("c4", "frames_select", {"table": "nope"})
    assert call_words(broken, conn.tools["frames_select"]) == "frames_select · table: nope"


def test_an_updates_code_matches_its_rows_once_before_writing_as_the_tool_does() -> None:
    """An update that changes the column it filters on, then another: the second value
    lands on the rows the filter matched before the first was written."""
    args = {
        "table": "orders",
        "values": {"qty": None, "paid": "false", "status": "checked"},
        "filters": [{"column": "qty", "op": "gt", "value": 2}],
    }
    by_tool = frame()
    conn = frame_tools({"orders": {"frame": by_tool, "write": True}}, approve_writes=False)
    positional, keywords = conn.tools["frames_update"].validate(args)
    to_output(conn.tools["frames_update"].function(*positional, **keywords))
    hook = conn.tools["frames_update"].code
    assert hook is not None
    ctx = CodeContext("result_1")
    namespace: dict[str, Any] = {"orders": frame()}
    exec("\n\n".join([*ctx.setups, hook(args, ctx) or ""]), namespace)
    assert_frame_equal(namespace["orders"], by_tool)
