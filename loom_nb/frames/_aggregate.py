"""What the DataFrame backend's aggregate tool can compute (the grammar is shared:
``loom_nb._tables.grammar.parse_aggregate``) and its computation with SQL's rules (a sum of no
values is missing; count_distinct and median ignore missing values)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from loom_nb._tables.grammar import (
    BUCKETS,
    KNOWN_FUNCTIONS,
    Aggregate,
    AggregateQuery,
    AggregateRules,
    GroupKey,
)
from loom_nb._tools import ToolInputError
from loom_nb.frames._buckets import bucket_keys, bucket_labels
from loom_nb.frames._values import dtype_kind

#: Every function the grammar knows but PostgREST's ``avg`` (pandas says ``mean``).
AGGREGATE_FUNCTIONS: tuple[str, ...] = tuple(f for f in KNOWN_FUNCTIONS if f != "avg")

#: pandas groups by time buckets and bins too, and orders the groups by any output.
FRAME_AGGREGATES = AggregateRules("pandas", AGGREGATE_FUNCTIONS, buckets=BUCKETS, bins=True)

#: Aggregates of numbers only (pandas would compute some of them over timestamps or text).
_NUMERIC_ONLY = ("sum", "std", "var", "percentile")


def check_aggregate(table: str, col: pd.Series, agg: Aggregate) -> None:
    """Refuse an aggregate that ``col``'s dtype cannot give, before anything is computed."""
    kind = dtype_kind(col.dtype)
    if agg.fn in ("sum", "mean", "median", "std", "var", "percentile"):
        numeric = kind in ("int", "float", "bool", "timedelta")
        if agg.fn in ("var", "percentile"):  # pandas has no variance of durations, ...
            numeric = kind in ("int", "float", "bool")
        ok = numeric or (kind == "datetime" and agg.fn not in _NUMERIC_ONLY)
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


def check_bins(table: str, col: pd.Series, key: GroupKey) -> None:
    """Bins are of numbers: refuse another column before anything is computed."""
    if dtype_kind(col.dtype) not in ("int", "float"):
        raise ToolInputError(
            f"bins need a numeric column; {table}.{key.column} is {col.dtype}. Use a time "
            "bucket for timestamps, or group by the column itself"
        )


def _apply(target: Any, a: Aggregate) -> Any:
    """One aggregate of a one-column frame or a grouped Series. A sum of no values is missing,
    as in SQL (pandas would say 0); count_distinct is SQL's count(DISTINCT column); std and
    var are the sample's (SQL's stddev and variance, pandas' default); a percentile
    interpolates linearly between the values (pandas' quantile, PostgreSQL's
    percentile_cont)."""
    if a.fn == "sum":
        return target.sum(min_count=1)
    if a.fn == "count_distinct":
        return target.nunique()
    if a.fn == "percentile":
        return target.quantile(a.p)
    return getattr(target, a.fn)()


def _read(col: pd.Series, a: Aggregate) -> pd.Series:
    """What ``a`` aggregates of ``data`` (its column): a percentile of booleans is of their
    numbers, 0 and 1, as DuckDB and PostgreSQL count them (pandas' quantile refuses booleans,
    though its median takes them)."""
    if a.fn == "percentile" and dtype_kind(col.dtype) == "bool":
        return col.astype("float64")
    return col


def _grouped_column(sub: pd.DataFrame, grouped: Any, by: list[pd.Series], a: Aggregate) -> Any:
    read = _read(sub[a.column], a)
    if read is sub[a.column]:
        return grouped[a.column]
    return read.groupby(by, dropna=False, observed=True, sort=True)  # as ``grouped`` groups


def bin_edges(values: pd.Series, bins: int | tuple[float, ...]) -> np.ndarray:
    """The edges of ``bins``: the given ones, or ``bins`` equal widths from the smallest to
    the largest value present (numpy's ``histogram_bin_edges``)."""
    if isinstance(bins, tuple):
        return np.asarray(bins, dtype="float64")
    present = values.dropna().to_numpy(dtype="float64")
    edges: np.ndarray = np.histogram_bin_edges(present, bins=bins)
    return edges


def bin_starts(values: pd.Series, edges: np.ndarray, name: str) -> pd.Series:
    """Each value's bin, by its left edge, as ``np.histogram`` bins: ``[left, right)``, the
    last bin ``[left, right]``; a missing value, or one outside the edges, has none (NaN, a
    group of its own). The same ``pd.cut`` an export writes."""
    last = np.nextafter(edges[-1], np.inf)  # the last bin holds its right edge
    cut = pd.cut(values, [*edges[:-1], last], right=False, labels=edges[:-1])
    return pd.Series(cut, index=values.index, name=name).astype("float64")


def _key(sub: pd.DataFrame, k: GroupKey, edges: dict[str, list[float]]) -> pd.Series:
    if k.bins is not None:
        found = bin_edges(sub[k.column], k.bins)
        edges[k.output] = [float(e) for e in found]
        return bin_starts(sub[k.column], found, k.output)
    return sub[k.column] if k.bucket is None else bucket_keys(sub[k.column], k.bucket)


def compute_aggregate(
    sub: pd.DataFrame, q: AggregateQuery, edges: dict[str, list[float]] | None = None
) -> pd.DataFrame:
    """One row per group (missing values form a group, as SQL's GROUP BY does), or one row.

    The one row is reduced from one-column frames (``sub[["total"]].sum()``), which keep the
    column's dtype as a group's reduction does: a scalar would lose it (a tz-aware NaT, an
    Int64 NA) when no row matches. ``edges`` gets the edges of each bins group."""
    edges = {} if edges is None else edges
    if not q.group_by:
        row = {
            a.output: pd.Series([len(sub)])
            if a.column is None
            else _apply(_read(sub[a.column], a).to_frame(), a).reset_index(drop=True)
            for a in q.aggregates
        }
        return pd.DataFrame(row)
    keys = [_key(sub, k, edges) for k in q.group_by]
    by = [key.rename(k.output) for key, k in zip(keys, q.group_by, strict=True)]
    grouped = sub.groupby(by, dropna=False, observed=True, sort=True)
    parts = {
        a.output: grouped.size()
        if a.column is None
        else _apply(_grouped_column(sub, grouped, by, a), a)
        for a in q.aggregates
    }
    out = pd.DataFrame(parts).reset_index()
    for k in q.group_by:
        if k.bucket is not None:
            out[k.output] = bucket_labels(out[k.output], sub[k.column], k.bucket)
    return out
