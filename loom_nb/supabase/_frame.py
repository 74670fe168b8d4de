"""PostgREST's JSON rows as a DataFrame with the dtypes a pandas user expects: what the Supabase
tools return, and (embedded, see ``loom_nb._embed``) what an export's code turns its responses
into, so that both are one function. Plain pandas: an export carries this module as code."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import pandas as pd

_TIMESTAMP = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}(?::?\d{2})?)?"
)
_HAS_ZONE = re.compile(r"(?:Z|[+-]\d{2}(?::?\d{2})?)$")


def postgrest_frame(
    rows: list[dict[str, Any]], columns: Sequence[str] | None = None
) -> pd.DataFrame:
    """PostgREST's JSON rows as loom_nb's DataFrame of them: the ``columns`` in order (by
    default every key, in the order they first appear), integer columns with NULLs as
    ``Int64`` (not float), text columns of ISO 8601 timestamps as ``datetime64`` (UTC when
    they carry an offset, as ``timestamptz`` does)."""
    if columns is None:
        names: dict[str, None] = {}
        for row in rows[:1]:
            names.update(dict.fromkeys(row))
        for row in rows[1:]:  # rows of one table mostly share their keys: a quick check each
            if len(row) != len(names) or any(key not in names for key in row):
                names.update(dict.fromkeys(row))
        columns = list(names)
    frame = (
        pd.DataFrame.from_records(rows, columns=list(columns))
        if rows
        else pd.DataFrame(columns=list(columns))
    )
    for name in frame.columns:
        col = frame[name]
        if col.dtype.kind == "f" and col.isna().any():
            values = [row.get(name) for row in rows]
            if all(type(v) is int for v in values if v is not None):
                frame[name] = pd.array(values, dtype="Int64")
        elif col.dtype.kind == "O" or pd.api.types.is_string_dtype(col.dtype):
            frame[name] = _timestamps(col)
    return frame


def _timestamps(col: pd.Series) -> pd.Series:
    """``col`` as datetimes when every value is an ISO 8601 timestamp, all of them with an
    offset or none; else ``col`` as it is."""
    zoned = naive = 0
    for v in col.tolist():
        if v is None or (isinstance(v, float) and math.isnan(v)):
            continue
        if not isinstance(v, str) or not _TIMESTAMP.fullmatch(v):
            return col
        if _HAS_ZONE.search(v):
            zoned += 1
        else:
            naive += 1
    if (not zoned and not naive) or (zoned and naive):
        return col  # empty, or a mix of local and zoned times: leave the text as it is
    try:
        return pd.to_datetime(col, format="ISO8601", utc=bool(zoned))
    except (ValueError, TypeError, OverflowError):
        return col
