"""A time bucket's start, row by row, in plain pandas and numpy: what an export's code groups
by (embedded, see ``loom_nb._embed``) where ``frames_aggregate`` groups by a bucket. The tool
itself works on one integer key per row (``_buckets.py``, quicker) and turns only the groups'
keys into starts; both end in :func:`localize_starts`, and the tests hold the two to the same
groups."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd


def bucket_start(timestamps: pd.Series, bucket: str) -> pd.Series:
    """The start of each timestamp's day, week (weeks start on Monday), month, quarter or
    year, on the column's own clock (its time zone's wall clock), named like
    ``week_created_at``; NaT stays NaT, a group of its own."""
    clock = pd.DatetimeIndex(timestamps)
    if clock.tz is not None:
        clock = clock.tz_localize(None)
    wall = clock.to_numpy()
    unit = {"day": "D", "week": "D", "month": "M", "quarter": "M", "year": "Y"}[bucket]
    start = wall.astype(f"datetime64[{unit}]")
    if bucket == "week":  # back to Monday: day 0, 1970-01-01, was a Thursday
        start = start - (start.view("int64") + 3) % 7
    elif bucket == "quarter":  # back to January, April, July or October
        start = start - start.view("int64") % 3
    name = f"{bucket}_{timestamps.name}"
    starts = pd.Series(start.astype(wall.dtype), index=timestamps.index, name=name)
    return localize_starts(starts, timestamps.dtype)


def localize_starts(labels: pd.Series, dtype: Any) -> pd.Series:
    """Bucket starts (wall clock) in ``dtype``'s time zone. A start that does not exist there
    (a midnight skipped by a summer time change) becomes the first time that does; one that
    occurs twice is the first occurrence, so every bucket starts where its first row could."""
    tz = getattr(dtype, "tz", None)
    if tz is None:
        return labels
    first = np.ones(len(labels), dtype=bool)
    return labels.dt.tz_localize(tz, ambiguous=first, nonexistent="shift_forward")
