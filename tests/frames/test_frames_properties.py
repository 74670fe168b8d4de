"""Arbitrary arguments: reads never raise and stay bounded; writes keep the dtypes."""

from __future__ import annotations

import re
from typing import Any

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pandas.testing import assert_frame_equal

from loom_nb._tables.grammar import BUCKETS, OPERATORS
from loom_nb._tools import Connector, ToolInputError, ToolOutput, to_output
from loom_nb.frames import frame_tools
from loom_nb.frames._aggregate import AGGREGATE_FUNCTIONS
from tests.frames._orders import orders_frame

COLUMNS = [*orders_frame().columns, "secret", "x y", "", "order"]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=True),
    st.text(max_size=12),
    st.sampled_from(
        [
            "2024-01-03",
            "2024-01-03T09:00:00+05:00",
            "mid",
            "open",
            "op%",
            "_%",
            "retail",
            "true",
            "4",
            "1e400",
        ]
    ),
)
values = st.one_of(
    scalars,
    st.lists(scalars, max_size=4),
    st.dictionaries(st.text(max_size=3), scalars, max_size=2),
)
columns = st.one_of(st.sampled_from(COLUMNS), st.integers(), st.none())
filters = st.lists(
    st.fixed_dictionaries(
        {"column": columns, "op": st.one_of(st.sampled_from([*OPERATORS, "between"]), st.none())},
        optional={"value": values, "not": st.one_of(st.booleans(), scalars)},
    ),
    max_size=3,
)
orders_list = st.lists(
    st.fixed_dictionaries(
        {"column": columns}, optional={"desc": st.one_of(st.booleans(), scalars)}
    ),
    max_size=2,
)
small_int = st.one_of(st.integers(-3, 12), scalars)
select_args = st.fixed_dictionaries(
    {"table": st.sampled_from(["orders", "orders", "nope", 3])},
    optional={
        "columns": st.one_of(st.lists(columns, max_size=4), scalars),
        "filters": st.one_of(filters, scalars),
        "order": orders_list,
        "limit": small_int,
        "offset": small_int,
        "count": st.one_of(st.booleans(), scalars),
    },
)
aggregate_args = st.fixed_dictionaries(
    {"table": st.sampled_from(["orders", "orders", "nope"])},
    optional={
        "group_by": st.lists(
            st.one_of(
                columns,
                st.fixed_dictionaries(
                    {
                        "column": columns,
                        "bucket": st.one_of(st.sampled_from([*BUCKETS, "hour"]), scalars),
                    }
                ),
            ),
            max_size=3,
        ),
        "aggregates": st.lists(
            st.fixed_dictionaries(
                {"fn": st.one_of(st.sampled_from([*AGGREGATE_FUNCTIONS, "mode"]), scalars)},
                optional={"column": columns},
            ),
            max_size=3,
        ),
        "filters": filters,
        "order": st.lists(
            st.fixed_dictionaries(
                {
                    "column": st.sampled_from(
                        [
                            "count",
                            "sum_total",
                            "mean_qty",
                            "max_created_at",
                            "week_created_at",
                            "month_shipped_on",
                            "segment",
                            "status",
                            "nope",
                        ]
                    )
                },
                optional={"desc": st.booleans()},
            ),
            max_size=2,
        ),
        "limit": small_int,
        "offset": small_int,
    },
)
write_args = st.one_of(
    st.tuples(
        st.just("frames_append"),
        st.fixed_dictionaries(
            {
                "table": st.sampled_from(["orders", "nope"]),
                "rows": st.lists(st.dictionaries(columns, values, max_size=9), max_size=3),
            }
        ),
    ),
    st.tuples(
        st.just("frames_update"),
        st.fixed_dictionaries(
            {
                "table": st.sampled_from(["orders", "nope"]),
                "values": st.dictionaries(columns, values, max_size=3),
                "filters": filters,
            }
        ),
    ),
)

MAX = 3


def invoke(conn: Connector, name: str, args: Any) -> ToolOutput | None:
    """What Tool.call does for these (sync) tools, without the worker thread: validate, run.
    Returns None when the tool refused the arguments with an error for the model."""
    tool = conn.tools[name]
    try:
        positional, keywords = tool.validate(args)
        return to_output(tool.function(*positional, **keywords))
    except ToolInputError as exc:
        assert str(exc)  # the model is told why
        return None


def assert_bounded(out: ToolOutput | None) -> None:
    if out is None:
        return
    assert isinstance(out.data, pd.DataFrame)
    assert len(out.data) <= READER_FRAME_ROWS  # the user's frame
    shown = re.search(r" rows=(\d+) ", out.content or "")
    assert shown is not None and int(shown.group(1)) <= MAX


READER_FRAME_ROWS = MAX + 2
READER = frame_tools(
    {"orders": orders_frame()}, max_rows=MAX, frame_rows=READER_FRAME_ROWS
)  # reads change nothing


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(select_args, aggregate_args)
def test_arbitrary_reads_never_raise_and_stay_bounded(select, aggregate):
    conn = READER
    assert_bounded(invoke(conn, "frames_select", select))
    assert_bounded(invoke(conn, "frames_aggregate", aggregate))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(write_args, min_size=1, max_size=4))
def test_arbitrary_writes_never_raise_and_keep_the_frames_dtypes(writes):
    frame = orders_frame()
    dtypes = frame.dtypes.copy()
    conn = frame_tools(
        {"orders": {"frame": frame, "write": True}}, max_rows=MAX, approve_writes=False
    )
    expected_len = len(frame)
    for name, args in writes:
        out = invoke(conn, name, args)
        if out is not None and name == "frames_append":
            expected_len += len(args["rows"])
        assert len(frame) == expected_len
        assert_frame_equal(frame.dtypes.to_frame(), dtypes.to_frame())
        assert out is None or len(out.data) <= MAX
