"""What the DataFrame backend's aggregate tool can compute (the grammar is shared:
``loom_nb._tables.grammar.parse_aggregate``) and its computation with SQL's rules (a sum of no
values is missing; count_distinct and median ignore missing values)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from loom_nb._tables.grammar import BUCKETS, Aggregate, AggregateQuery, AggregateRules
from loom_nb._tools import ToolInputError
from loom_nb.frames._buckets import bucket_keys, bucket_labels
from loom_nb.frames._values import dtype_kind

AGGREGATE_FUNCTIONS: tuple[str, ...] = (
    "count",
    "count_distinct",
    "sum",
    "mean",
    "median",
    "min",
    "max",
)

#: pandas groups by time buckets too, and orders the groups by any output.
FRAME_AGGREGATES = AggregateRules("pandas", AGGREGATE_FUNCTIONS, buckets=BUCKETS)


def check_aggregate(table: str, col: pd.Series, agg: Aggregate) -> None:
    """Refuse an aggregate that ``col``'s dtype cannot give, before anything is computed."""
    kind = dtype_kind(col.dtype)
    if agg.fn in ("sum", "mean", "median"):
        numeric = kind in ("int", "float", "bool", "timedelta")
        ok = numeric or (kind == "datetime" and agg.fn != "sum")
        if not ok:
            raise ToolInputError(
                f"{agg.fn} needs a numeric column; {table}.{agg.column} is {col.dtype}. "
                "Use count, count_distinct, min or max"
            )
    if agg.fn in ("min", "max") and kind == "category" and not col.cat.ordered:
        raise ToolInputError(
            f"{table}.{agg.column} is an unordered category, so it has no {agg.fn}; "
            "group by it instead"
        )


def _apply(target: Any, a: Aggregate) -> Any:
    """One aggregate of a one-column frame or a grouped Series. A sum of no values is missing,
    as in SQL (pandas would say 0); count_distinct is SQL's count(DISTINCT column)."""
    if a.fn == "sum":
        return target.sum(min_count=1)
    if a.fn == "count_distinct":
        return target.nunique()
    return getattr(target, a.fn)()


def compute_aggregate(sub: pd.DataFrame, q: AggregateQuery) -> pd.DataFrame:
    """One row per group (missing values form a group, as SQL's GROUP BY does), or one row.

    The one row is reduced from one-column frames (``sub[["total"]].sum()``), which keep the
    column's dtype as a group's reduction does: a scalar would lose it (a tz-aware NaT, an
    Int64 NA) when no row matches."""
    if not q.group_by:
        row = {
            a.output: pd.Series([len(sub)])
            if a.column is None
            else _apply(sub[[a.column]], a).reset_index(drop=True)
            for a in q.aggregates
        }
        return pd.DataFrame(row)
    keys = [
        sub[k.column] if k.bucket is None else bucket_keys(sub[k.column], k.bucket)
        for k in q.group_by
    ]
    grouped = sub.groupby(
        [key.rename(k.output) for key, k in zip(keys, q.group_by, strict=True)],
        dropna=False,
        observed=True,
        sort=True,
    )
    parts = {
        a.output: grouped.size() if a.column is None else _apply(grouped[a.column], a)
        for a in q.aggregates
    }
    out = pd.DataFrame(parts).reset_index()
    for k in q.group_by:
        if k.bucket is not None:
            out[k.output] = bucket_labels(out[k.output], sub[k.column], k.bucket)
    return out
