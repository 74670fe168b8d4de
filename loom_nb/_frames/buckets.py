"""Time buckets for ``group_by``: the day, week, month, quarter or year of each timestamp, on
the column's own calendar (its time zone's wall clock), labelled by the bucket's start.

This is what ``groupby(pd.Grouper(key=C, freq="D" | "W-MON" | "MS" | "QS" | "YS",
closed="left", label="left"))`` computes, with two differences that follow SQL's
``GROUP BY date_trunc(...)``, as plain group_by columns do: only buckets that hold a row come
back (Grouper also returns the empty ones between), and missing timestamps (NaT) form their
own group, last (Grouper drops them). A day that begins after a skipped midnight (a summer
time change at 00:00) starts at its first existing time, and one with two midnights at the
first, as Grouper labels them (Grouper raises instead when such a day holds its first or last
row).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from loom_nb._frames.values import dtype_kind
from loom_nb._query import GroupKey
from loom_nb._tools import ToolInputError

#: 1970-01-01, day 0 of numpy's calendar, was a Thursday: Monday-based weekday is (day + 3) % 7.
_THURSDAY = 3


def check_bucket(table: str, df: pd.DataFrame, key: GroupKey, allowed: list[str]) -> None:
    """Refuse a bucket of a column that holds no timestamps, naming the ``allowed`` columns
    that do."""
    col = df[key.column]
    if dtype_kind(col.dtype) == "datetime":
        return
    datetimes = [c for c in allowed if c in df.columns and dtype_kind(df[c].dtype) == "datetime"]
    fix = (
        f"bucket one of its datetime columns ({', '.join(datetimes)})"
        if datetimes
        else f"{table!r} has no datetime column"
    )
    raise ToolInputError(
        f"a {key.bucket} bucket needs a datetime column; {table}.{key.column} is {col.dtype}. "
        f'Group by the column itself ("group_by": ["{key.column}"]) or {fix}'
    )


def bucket_starts(col: pd.Series, bucket: str) -> pd.Series:
    """Each value's bucket start as wall-clock time without a zone (NaT stays NaT), in the
    column's unit. Grouping by these and localizing only the group labels afterwards
    (:func:`localize_starts`) avoids time zone arithmetic on every row."""
    if not isinstance(col.dtype, (np.dtype, pd.DatetimeTZDtype)):  # pyarrow timestamps
        col = pd.Series(pd.DatetimeIndex(col), index=col.index, name=col.name)
    wall = col.dt.tz_localize(None) if getattr(col.dtype, "tz", None) is not None else col
    values = wall.to_numpy()
    unit = np.datetime_data(values.dtype)[0]
    missing = np.isnat(values)
    if bucket == "day":
        starts = values.astype("datetime64[D]")
    elif bucket == "week":
        days = values.astype("datetime64[D]").view("int64")
        starts = np.where(missing, days, days - (days + _THURSDAY) % 7).view("datetime64[D]")
    elif bucket == "month":
        starts = values.astype("datetime64[M]")
    elif bucket == "quarter":
        months = values.astype("datetime64[M]").view("int64")
        starts = np.where(missing, months, months - months % 3).view("datetime64[M]")
    else:
        starts = values.astype("datetime64[Y]")
    return pd.Series(starts.astype(f"datetime64[{unit}]"), index=col.index, name=col.name)


def localize_starts(labels: pd.Series, tz: Any) -> pd.Series:
    """Bucket starts (wall clock) in ``tz``. A start that does not exist there (a midnight
    skipped by a DST change) becomes the first time that does; one that occurs twice is the
    first occurrence, so every bucket starts where its first row could be."""
    if tz is None:
        return labels
    first = np.ones(len(labels), dtype=bool)
    return labels.dt.tz_localize(tz, ambiguous=first, nonexistent="shift_forward")
