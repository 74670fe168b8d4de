"""A chart's spec: the model's arguments checked against the earlier result they name, and
the JSON saved in the thread, holding the rows it plots (only the columns used).

Rows without an x value (NaT, NaN, None, an infinite number) have no place on the axis, and
rows without a y value have nothing to draw; both are left out of the data, counted in
``left_out`` (``{"x": rows without x, "y": rows with x but without y}``), and the chart and
the model's text say how many. A missing colour value is a series of its own,
"(missing)".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from loom_nb import _codec
from loom_nb._counts import counts_of, cut, partial
from loom_nb._messages import ToolResult
from loom_nb._tools import ToolInputError
from loom_nb.charts._plot import KINDS, MAX_SERIES, axis_kind, default_title

#: Version of the spec's JSON form.
SPEC_VERSION = 1
_MAX_LISTED = 10


def chart_spec(
    args: Mapping[str, Any], results: Iterable[ToolResult], max_points: int
) -> tuple[dict[str, Any], pd.DataFrame]:
    """The spec to save and the rows it plots; :class:`ToolInputError` when the arguments
    do not fit the result they name."""
    results = list(results)
    kind = args.get("kind")
    if kind not in KINDS:
        raise ToolInputError(f"kind {kind!r} is not one of {list(KINDS)}")
    result = _find(results, args.get("result"))
    frame: pd.DataFrame = result.data.rename(columns=str)  # the names the model was shown
    where = f"the result of {result.call_id} ({result.name})"
    x = _column(frame, args.get("x"), "x", where)
    if not len(frame):  # before the dtypes: a database result without rows has none to tell
        raise ToolInputError(f"nothing to draw: {where} has no rows")
    y_arg, color_arg = args.get("y"), args.get("color")
    found = counts_of(result.data) or {}
    edges = (found.get("edges") or {}).get(x)
    if kind == "histogram" and edges is not None:  # the bins of an aggregate: y counts them
        if y_arg is None:
            raise ToolInputError(
                f"{x} holds the bins of an aggregate: give y, its count column (like count)"
            )
        y = _column(frame, y_arg, "y", where)
    elif kind == "box":
        y = _box_column(frame, y_arg, where)
    elif kind == "histogram":
        if y_arg is not None:
            raise ToolInputError(
                "a histogram counts the rows in bins of x; leave y out (or aggregate with a "
                'bins group, {"column": x, "bins": 20}, and chart its count as y)'
            )
        if axis_kind(frame[x]) == "category":
            raise ToolInputError(
                f"a histogram needs numbers or timestamps for x; {x} is {frame[x].dtype}. "
                "Draw a bar chart of counts instead, or bin one of "
                f"{_kinds(frame, 'number', 'time')}"
            )
        y = None
    else:
        if y_arg is None:
            raise ToolInputError(
                f"a {kind} chart needs y: one of the numeric columns of {where}: "
                f"{_kinds(frame, 'number')}"
            )
        y = _column(frame, y_arg, "y", where)
        if axis_kind(frame[y]) != "number":
            raise ToolInputError(
                f"y must be a numeric column; {y} is {frame[y].dtype}. Numeric columns of "
                f"{where}: {_kinds(frame, 'number')}"
            )
    if kind == "box" and color_arg is not None:
        raise ToolInputError("a box plot has one box per x value; leave color out")
    color = None if color_arg is None else _column(frame, color_arg, "color", where)
    title = args.get("title")
    if title is not None and not isinstance(title, str):
        raise ToolInputError("title must be a string")
    used = list(dict.fromkeys(c for c in (x, y, color) if c is not None))
    plotted = frame[used]
    has_x = _has_value(plotted[x])
    keep = has_x & _has_value(plotted[y]) if y is not None else has_x
    left_out = {"x": int((~has_x).sum()), "y": int((has_x & ~keep).sum())}
    plotted = plotted[keep].reset_index(drop=True)
    if not len(plotted):
        missing = f"a {x} value" if y is None else f"both {x} and {y}"
        raise ToolInputError(f"nothing to draw: no row of {where} has {missing}")
    _within_axes(plotted[[y]] if kind == "box" else plotted, edges)  # a box's x only names it
    drawn = {"rows": len(plotted)}
    if kind == "box":  # the quartiles of every row, not the rows: a box holds any number
        assert y is not None
        _whole(found, where)
        plotted = box_stats(plotted, x, y)
        if len(plotted) > MAX_BOXES:
            raise ToolInputError(
                f"{x} has {len(plotted)} distinct values; a box plot draws at most {MAX_BOXES} "
                "boxes. Choose an x with fewer values, or filter first"
            )
    elif len(plotted) > max_points:  # the chart's own bound: the first rows, and it says so
        plotted = plotted.head(max_points)
        drawn = {"rows": len(plotted), "of": drawn["rows"], "max_points": max_points}
    if color is not None:
        series = plotted[color].nunique(dropna=False)
        if series > MAX_SERIES:
            raise ToolInputError(
                f"color {color} has {series} distinct values; at most {MAX_SERIES} colours can "
                "be told apart. Colour by a column with fewer values, or leave color out"
            )
    spec = {
        "version": SPEC_VERSION,
        "kind": kind,
        "result": result.call_id,
        "tool": result.name,
        "x": x,
        "y": y,
        "color": color,
        "title": (title or "").strip() or default_title(kind, x, y),
        "left_out": left_out,
        "drawn": drawn,
        "data": _codec.encode(plotted),
    }
    if found and (cut(found) or partial(found)):  # a chart of part of the matching rows
        spec["covers"] = {
            "rows": found["rows"],
            "matched": found.get("matched"),
            "what": found.get("what", "row"),
        }
    bucket = (found.get("buckets") or {}).get(x)
    if bucket is not None and kind != "box" and axis_kind(plotted[x]) == "time":
        spec["bucket"] = bucket
    if edges is not None:
        spec["edges"] = edges
    return spec, plotted


#: The most boxes one box plot draws.
MAX_BOXES = 50


def box_stats(rows: pd.DataFrame, x: str, y: str) -> pd.DataFrame:
    """One row per value of ``x`` (in order; ``x == y`` gives one box of all rows): the
    smallest value, the quartiles (pandas' linear ``quantile``), the largest, and how many
    rows the box holds."""
    values = rows[y].astype("float64")
    keys = pd.Series("all rows", index=rows.index) if x == y else rows[x]
    grouped = values.groupby(keys, sort=True, observed=True)
    stats = pd.DataFrame(
        {
            "min": grouped.min(),
            "q1": grouped.quantile(0.25),
            "median": grouped.median(),
            "q3": grouped.quantile(0.75),
            "max": grouped.max(),
            "rows": grouped.size(),
        }
    )
    return stats.rename_axis(x).reset_index()


def _box_column(frame: pd.DataFrame, name: Any, where: str) -> str:
    if name is None:
        raise ToolInputError(
            f"a box plot needs y, the numeric column whose spread it shows (one box per x "
            f"value; x = y for one box): one of {_kinds(frame, 'number')}"
        )
    y = _column(frame, name, "y", where)
    if axis_kind(frame[y]) != "number":
        raise ToolInputError(
            f"y must be a numeric column; {y} is {frame[y].dtype}. Numeric columns of "
            f"{where}: {_kinds(frame, 'number')}"
        )
    return y


def _whole(found: Mapping[str, Any], where: str) -> None:
    """A box plot's quartiles are of every matching row, or it is not drawn: a result that
    holds part of them (a limit, ``frame_rows``) would give the quartiles of a page."""
    if not found or not (cut(found) or partial(found)):
        return
    matched = found.get("matched")
    held = f"{found['rows']:,} of {matched:,}" if matched is not None else f"{found['rows']:,}"
    raise ToolInputError(
        f"a box plot shows the quartiles of every matching row, but {where} holds {held} "
        f"{found.get('what', 'row')}s (a limit or frame_rows cut it). Fetch every row (no "
        "limit; the user can raise frame_rows), or aggregate percentiles by group (fn "
        "percentile with p 0.25, 0.5, 0.75 where the backend computes them: PostgREST "
        "cannot) and chart those"
    )


def _has_value(col: pd.Series) -> pd.Series:
    """Which rows have a place on the axis: not missing, and for numbers not infinite (a
    database's float column may hold Infinity)."""
    present = col.notna()
    if axis_kind(col) == "number":
        present &= ~col.isin([np.inf, -np.inf])
    return present


#: The largest magnitude a chart's axis holds: past about 1e308 matplotlib's margins and ticks
#: overflow float64 (1.7e308 beside 0, or 1e308 beside -1e308, fail to draw).
MAX_AXIS = 1e300


def _within_axes(plotted: pd.DataFrame, edges: Any) -> None:
    """Refuse numbers too large to draw, naming the column, before anything is saved."""
    columns = [(str(c), plotted[c]) for c in plotted.columns if axis_kind(plotted[c]) == "number"]
    if edges is not None:
        columns.append(("the bins' edges", pd.Series(edges, dtype="float64")))
    for name, column in columns:
        values = np.abs(column.to_numpy(dtype="float64", na_value=np.nan))
        values = values[np.isfinite(values)]
        if values.size and values.max() > MAX_AXIS:
            raise ToolInputError(
                f"{name} holds {values.max():.3g}, too large for a chart's axis (at most "
                f"{MAX_AXIS:.0e} either way): filter those rows out, or chart a scaled column"
            )


def _find(results: list[ToolResult], call_id: Any) -> ToolResult:
    tables = [r for r in results if not r.is_error and _codec.is_dataframe(r.data)]
    for r in reversed(results):
        if r.call_id == call_id:
            if not r.is_error and _codec.is_dataframe(r.data):
                return r
            raise ToolInputError(
                f"the result of {call_id} ({r.name}) is not a table of rows, so there is "
                f"nothing to chart. {_listing(tables)}"
            )
    raise ToolInputError(
        f"no earlier result {call_id!r} in this thread (a call of this same turn has no result "
        f"yet). {_listing(tables)}"
    )


def _listing(tables: list[ToolResult]) -> str:
    if not tables:
        return (
            "This thread has no table result yet: fetch the rows first (for example with an "
            "aggregate), then chart that call's id."
        )
    items = []
    for r in tables[-_MAX_LISTED:]:
        names = [str(c) for c in r.data.columns]
        shown = ", ".join(names[:20]) + (", …" if len(names) > 20 else "")
        items.append(f"{r.call_id} ({r.name}: {shown})")
    return "Results you can chart, by call id: " + "; ".join(items)


def _column(frame: pd.DataFrame, name: Any, role: str, where: str) -> str:
    columns = [str(c) for c in frame.columns]
    if not isinstance(name, str) or name not in columns:
        raise ToolInputError(f"{role}: {name!r} is not a column of {where}; its columns: {columns}")
    if columns.count(name) > 1:
        raise ToolInputError(f"{role}: {where} has two columns named {name!r}")
    return name


def _kinds(frame: pd.DataFrame, *kinds: str) -> list[str]:
    found = [str(c) for c in frame.columns if axis_kind(frame[c]) in kinds]
    return found or ["none"]
