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

import numpy as np
import pandas as pd

from loom_nb._tables.grammar import GroupKey
from loom_nb._tools import ToolInputError
from loom_nb.frames._bucket_start import localize_starts
from loom_nb.frames._values import dtype_kind

#: 1970-01-01, day 0 of numpy's calendar, was a Thursday; (day + 3) // 7 counts Monday weeks.
_THURSDAY = 3
#: The key of a missing timestamp's group: after every bucket, as SQL sorts NULL.
_MISSING = np.iinfo("int64").max


def check_bucket(
    table: str, col: pd.Series, key: GroupKey, frame: pd.DataFrame, allowed: list[str]
) -> None:
    """Refuse a bucket of a column (``col``, as the query reads it) that holds no timestamps,
    naming the ``allowed`` columns of ``table`` (``frame``: its rows, or none) that do."""
    if dtype_kind(col.dtype) == "datetime":
        return
    datetimes = [
        c for c in allowed if c in frame.columns and dtype_kind(frame[c].dtype) == "datetime"
    ]
    fix = (
        f"bucket one of its datetime columns ({', '.join(datetimes)})"
        if datetimes
        else f"{table!r} has no datetime column"
    )
    raise ToolInputError(
        f"a {key.bucket} bucket needs a datetime column; {table}.{key.column} is {col.dtype}. "
        f'Group by the column itself ("group_by": ["{key.column}"]) or {fix}'
    )


def bucket_keys(col: pd.Series, bucket: str) -> pd.Series:
    """One integer per row that orders and identifies its bucket (a day number, a week number,
    or the day number of the month's, quarter's or year's first day), on the column's wall
    clock; a missing timestamp gets a key after all others. Grouping by these integers and
    turning only the groups' keys into timestamps (:func:`bucket_labels`) keeps time zones,
    calendars and NaT out of the work done for every row."""
    values = _wall_clock(col)
    per_day = _per_day(values.dtype)
    missing = np.isnat(values)
    any_missing = bool(missing.any())
    days = values.view("int64") // per_day  # floor division: days before 1970 too
    if any_missing:  # a stand-in from the column, so that NaT does not widen its span
        days[missing] = 0 if missing.all() else days[np.argmin(missing)]
    if bucket == "day":
        keys = days
    elif bucket == "week":
        keys = (days + _THURSDAY) // 7
    else:
        keys = _first_days(days, bucket)
    if any_missing:
        keys[missing] = _MISSING
    return pd.Series(keys, index=col.index, name=col.name)


def bucket_labels(keys: pd.Series, col: pd.Series, bucket: str) -> pd.Series:
    """The start of each key's bucket, with ``col``'s dtype (NaT for the missing key)."""
    dtype = _wall_clock(col[:0]).dtype
    days = keys.to_numpy(dtype="int64")
    missing = days == _MISSING
    if bucket == "week":
        days = days * 7 - _THURSDAY
    out = np.where(missing, np.iinfo("int64").min, days * _per_day(dtype)).view(dtype)
    return localize_starts(pd.Series(out, index=keys.index, name=keys.name), col.dtype)


def _wall_clock(col: pd.Series) -> np.ndarray:
    """``col``'s values as numpy datetimes, a tz-aware column's as its local wall clock."""
    if not isinstance(col.dtype, (np.dtype, pd.DatetimeTZDtype)):  # pyarrow timestamps
        col = pd.Series(pd.DatetimeIndex(col), index=col.index, name=col.name)
    wall = col.dt.tz_localize(None) if getattr(col.dtype, "tz", None) is not None else col
    values: np.ndarray = wall.to_numpy()
    return values


def _per_day(dtype: np.dtype) -> int:
    """How many of ``dtype``'s units make a day."""
    unit = np.datetime_data(dtype)[0]
    return int(np.timedelta64(1, "D").astype(f"timedelta64[{unit}]").astype("int64"))


def _first_days(days: np.ndarray, bucket: str) -> np.ndarray:
    """The first day of each day's month, quarter or year (days since 1970-01-01).

    Rows usually span far fewer days than there are rows, so each day of the span is
    converted once and the rows look theirs up (numpy's calendar conversion costs about
    30 ns a value, a lookup a few)."""
    first, last = (int(days.min()), int(days.max())) if len(days) else (0, -1)
    if last - first >= len(days):
        return _first_days_of(days, bucket)
    return np.take(_first_days_of(np.arange(first, last + 1), bucket), days - first)


def _first_days_of(days: np.ndarray, bucket: str) -> np.ndarray:
    months = days.view("datetime64[D]").astype("datetime64[M]").view("int64")
    months = months - months % {"month": 1, "quarter": 3, "year": 12}[bucket]
    out: np.ndarray = months.view("datetime64[M]").astype("datetime64[D]").view("int64")
    return out
