"""Time buckets in frames_aggregate: the same groups as pandas' Grouper, in the column's time
zone, with missing timestamps as their own group; and what is refused."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st
from pandas.testing import assert_frame_equal

from loom_nb._tables.grammar import BUCKETS
from loom_nb._tools import Connector, to_output
from loom_nb.frames import frame_tools
from tests.frames._orders import call, refused

#: The pandas frequency each bucket equals, with bins closed and labelled on the left.
FREQ = {"day": "D", "week": "W-MON", "month": "MS", "quarter": "QS", "year": "YS"}
TIMEZONES = [
    None,
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "America/Santiago",  # skips midnight when summer time starts
    "America/Havana",  # repeats midnight when summer time ends
    "Asia/Kolkata",
    "Australia/Lord_Howe",  # half-hour summer time
]
DAY = 86_400
#: Near summer-time changes and the epoch, where a bucket's bounds are easiest to get wrong.
NEAR = [
    int(pd.Timestamp(day).timestamp())
    for day in ["2024-03-31", "2024-09-08", "2024-11-03", "2023-12-31", "1969-12-29"]
]
seconds = st.one_of(
    st.none(),
    st.integers(-10 * 365 * DAY, 70 * 365 * DAY),
    st.builds(lambda base, off: base + off, st.sampled_from(NEAR), st.integers(-4 * DAY, 4 * DAY)),
)
rows = st.lists(
    st.tuples(
        seconds,
        st.one_of(st.none(), st.sampled_from(["a", "b", "c"])),
        st.one_of(st.none(), st.integers(-1000, 1000)),
    ),
    min_size=1,
    max_size=40,
)
#: What a bucket test draws (here and in test_code.py): the rows, the time zone, the
#: timestamps' unit, the bucket, and whether to group by ``k`` as well.
BUCKETED = (
    rows,
    st.sampled_from(TIMEZONES),
    st.sampled_from(["s", "ms", "us", "ns"]),
    st.sampled_from(BUCKETS),
    st.booleans(),
)
AGGREGATES = [
    {"fn": "count"},
    {"fn": "count", "column": "v"},
    {"fn": "sum", "column": "v"},
    {"fn": "mean", "column": "v"},
    {"fn": "median", "column": "v"},
    {"fn": "min", "column": "v"},
    {"fn": "max", "column": "v"},
    {"fn": "count_distinct", "column": "k"},
]


def frame(data: list[tuple[Any, Any, Any]], tz: str | None, unit: str) -> pd.DataFrame:
    secs = [s for s, _, _ in data]
    t = pd.to_datetime(pd.array(secs, dtype="Int64"), unit="s", utc=tz is not None)
    if tz is not None:
        t = t.tz_convert(tz)
    return pd.DataFrame(
        {
            "t": t.as_unit(unit),
            "k": [k for _, k, _ in data],
            "v": pd.array([v for _, _, v in data], dtype="float64"),
        }
    )


def summary(grouped: Any) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "count": grouped.size(),
            "count_v": grouped["v"].count(),
            "sum_v": grouped["v"].sum(min_count=1),
            "mean_v": grouped["v"].mean(),
            "median_v": grouped["v"].median(),
            "min_v": grouped["v"].min(),
            "max_v": grouped["v"].max(),
            "count_distinct_k": grouped["k"].nunique(),
        }
    )


def by_grouper(df: pd.DataFrame, bucket: str, by_k: bool) -> pd.DataFrame:
    """The same question in plain pandas: Grouper's non-empty bins, then the NaT rows."""
    others = ["k"] if by_k else []
    grouper = pd.Grouper(key="t", freq=FREQ[bucket], closed="left", label="left")
    timed = summary(df.groupby([grouper, *others], dropna=False, observed=True))
    parts = [timed[timed["count"] > 0].reset_index()]
    undated = df[df["t"].isna()]
    if len(undated):
        one = pd.Series(0, index=undated.index, name="t")
        nat = summary(undated.groupby([one, *others], dropna=False)).reset_index()
        nat["t"] = pd.Series(pd.NaT, index=nat.index, dtype=df["t"].dtype)
        parts.append(nat)
    out = pd.concat(parts, ignore_index=True).rename(columns={"t": f"{bucket}_t"})
    keys = [f"{bucket}_t", *others]
    return out.sort_values(keys, na_position="last", kind="stable").reset_index(drop=True)


def aggregate(conn: Connector, args: dict[str, Any]) -> pd.DataFrame:
    """frames_aggregate as the agent loop calls it (schema, then the tool), synchronously."""
    tool = conn.tools["frames_aggregate"]
    positional, keywords = tool.validate(args)
    data = to_output(tool.function(*positional, **keywords)).data
    assert isinstance(data, pd.DataFrame)
    return data


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(*BUCKETED)
def test_buckets_equal_pandas_grouper(data, tz, unit, bucket, by_k):
    df = frame(data, tz, unit)
    conn = frame_tools({"events": df}, max_rows=1000)
    group_by: list[Any] = [{"column": "t", "bucket": bucket}, *(["k"] if by_k else [])]
    got = aggregate(conn, {"table": "events", "group_by": group_by, "aggregates": AGGREGATES})
    try:
        expected = by_grouper(df, bucket, by_k)
    except ValueError as exc:
        # Grouper raises when its first or last bin starts at a skipped or repeated midnight
        # (Santiago, Havana); the tool does not (see the test below).
        if "nonexistent time" not in str(exc) and "Cannot infer dst time" not in str(exc):
            raise
        reject()
    assert_frame_equal(got, expected)


@pytest.mark.parametrize(
    ("tz", "times", "starts"),
    [
        # Santiago's 2024-09-08 has no midnight: its day begins at 01:00. (Grouper itself
        # raises when its first or last row falls on such a day, here and in Havana.)
        (
            "America/Santiago",
            ["2024-09-07T16:00Z", "2024-09-08T15:00Z", "2024-09-09T15:00Z"],
            ["2024-09-07T00:00-04:00", "2024-09-08T01:00-03:00", "2024-09-09T00:00-03:00"],
        ),
        # Havana's 2024-11-03 has two midnights: its day begins at the first.
        (
            "America/Havana",
            ["2024-11-02T16:00Z", "2024-11-03T04:30Z", "2024-11-03T17:00Z", "2024-11-04T17:00Z"],
            ["2024-11-02T00:00-04:00", "2024-11-03T00:00-04:00", "2024-11-04T00:00-05:00"],
        ),
    ],
)
def test_a_skipped_or_repeated_midnight_starts_its_day_as_grouper_does(tz, times, starts):
    df = pd.DataFrame({"t": pd.to_datetime(times).tz_convert(tz), "k": "a", "v": 1.0})
    got = aggregate(
        frame_tools({"events": df}),
        {
            "table": "events",
            "group_by": [{"column": "t", "bucket": "day"}],
            "aggregates": AGGREGATES,
        },
    )
    assert list(got["day_t"]) == [pd.Timestamp(s) for s in starts]
    assert_frame_equal(got, by_grouper(df, "day", by_k=False))


@pytest.fixture
def sessions() -> Connector:
    starts = [
        "2024-03-30 23:30",  # Saturday
        "2024-03-31 23:30",  # Sunday, the day Berlin moves to summer time
        "2024-04-01 00:10",  # Monday: a new week
        None,
        "2024-04-03 12:00",
    ]
    t = pd.to_datetime(starts).tz_localize("Europe/Berlin")
    df = pd.DataFrame(
        {"started": t, "user": ["u1", "u2", "u1", "u3", "u1"], "minutes": [5, 7, 9, 11, 20]}
    )
    return frame_tools({"sessions": df})


async def test_weeks_start_on_monday_labelled_by_their_local_start(sessions):
    out = await call(
        sessions,
        "frames_aggregate",
        {
            "table": "sessions",
            "group_by": [{"column": "started", "bucket": "week"}],
            "aggregates": [
                {"fn": "count"},
                {"fn": "count_distinct", "column": "user"},
                {"fn": "median", "column": "minutes"},
            ],
        },
    )
    df = out.data
    assert list(df.columns) == ["week_started", "count", "count_distinct_user", "median_minutes"]
    assert list(df["week_started"][:2]) == [
        pd.Timestamp("2024-03-25 00:00", tz="Europe/Berlin"),  # UTC+1, winter
        pd.Timestamp("2024-04-01 00:00", tz="Europe/Berlin"),  # UTC+2, summer
    ]
    assert pd.isna(df["week_started"][2])  # the session without a start: its own group, last
    assert list(df["count"]) == [2, 2, 1]
    assert list(df["count_distinct_user"]) == [2, 1, 1]
    assert list(df["median_minutes"]) == [6.0, 14.5, 11.0]
    assert "week_started:datetime64[us, Europe/Berlin]" in (out.content or "")


async def test_order_and_page_by_the_bucket(sessions):
    out = await call(
        sessions,
        "frames_aggregate",
        {
            "table": "sessions",
            "group_by": [{"column": "started", "bucket": "day"}, "user"],
            "filters": [{"column": "started", "op": "is_null", "not": True}],
            "order": [{"column": "day_started", "desc": True}],
            "limit": 2,
        },
    )
    assert list(out.data["day_started"].dt.day) == [3, 1]
    assert list(out.data["user"]) == ["u1", "u1"]
    assert (out.content or "").startswith("4 groups match. More match")


def test_the_schema_tells_the_model_the_bucket_form(sessions):
    group_by = sessions.tools["frames_aggregate"].parameters["properties"]["group_by"]
    plain, bucketed, binned = group_by["items"]["anyOf"]
    assert binned["required"] == ["column", "bins"]
    assert plain["type"] == "string"
    assert bucketed["properties"]["bucket"]["enum"] == ["day", "week", "month", "quarter", "year"]
    assert bucketed["required"] == ["column", "bucket"]
    assert "weeks start on Monday" in group_by["description"]
    assert "week_created_at" in group_by["description"]


@pytest.mark.parametrize(
    ("group_by", "message"),
    [
        (
            [{"column": "started", "bucket": "weekly"}],
            "group_by/0/bucket: 'weekly' is not one of ['day', 'week', 'month', 'quarter', 'year']",
        ),
        ([{"column": "started"}], "group_by/0: 'bucket' is a required property"),
        (
            [{"column": "minutes", "bucket": "month"}],
            "a month bucket needs a datetime column; sessions.minutes is int64. Group by the "
            'column itself ("group_by": ["minutes"]) or bucket one of its datetime columns '
            "(started)",
        ),
        ([{"column": "ended", "bucket": "day"}], "'sessions' has no column 'ended'"),
        (
            [{"column": "started", "bucket": "week"}, "week_started"],
            "group_by[1] would be named 'week_started' twice",
        ),
    ],
)
async def test_bad_buckets_say_how_to_fix_them(sessions, group_by, message):
    await refused(
        sessions,
        "frames_aggregate",
        {"table": "sessions", "group_by": group_by},
        re.escape(message),
    )


async def test_a_frame_without_datetimes_says_so():
    conn = frame_tools({"prices": pd.DataFrame({"sku": ["a"], "price": np.array([1.5])})})
    await refused(
        conn,
        "frames_aggregate",
        {"table": "prices", "group_by": [{"column": "price", "bucket": "year"}]},
        "'prices' has no datetime column",
    )
