"""Let an agent explore the DataFrames already in your notebook, with the Supabase rules.

::

    from loom_nb.frames import frame_tools

    data = frame_tools(
        {
            "orders": {"frame": orders, "description": "Customer orders", "write": True},
            "customers": customers,                      # a DataFrame alone: read-only, all columns
        },
        max_rows=50, approve_writes=True, name="frames",
    )
    analyst = define_agent(name="analyst", model=..., connectors=[data])

Tools (``frames`` is the ``name=`` prefix):

``frames_list_tables()``
    Each frame: name, description, row count, columns with dtypes (and the values of
    categorical columns), writable or not.
``frames_select(table, columns?, filters?, order?, limit?, offset?, count?)``
    The arguments and checks of the Supabase select: filters ``{column, op, value, not}`` with
    ``op`` one of eq, neq, gt, gte, lt, lte, like, ilike, in, is_null; ``order``
    ``[{column, desc}]``; ``limit`` at most ``max_rows``; ``offset`` for paging; ``count`` for
    the number of matching rows.
``frames_aggregate(table, group_by?, aggregates?, filters?, order?, limit?, offset?)``
    ``aggregates`` ``[{fn, column}]`` with ``fn`` one of count, sum, mean, min, max; output
    columns are named ``fn_column`` (``count`` counts rows). At most ``max_rows`` groups come
    back; ``order`` may name a group column or an output column.
``frames_append(table, rows)`` and ``frames_update(table, values, filters)``
    Only when a frame has ``write: True``. Each waits for Approve unless
    ``approve_writes=False``. An update without a filter is refused.

Rules, as the model meets them:

- Only the named frames exist, and only their allowed columns (``columns=[...]``, else every
  column of the frame as it is at call time). Names are plain identifiers.
- Filter values are converted to the column's dtype: numbers from numeric strings, timestamps
  from ISO 8601 strings (a time without an offset is read in a tz-aware column's time zone),
  numbers to text for text columns. When that is impossible the model gets an error saying
  why. Missing values (NaN, None, NaT, NA) match only ``is_null``, negated or not, as in SQL.
- ``like``/``ilike`` use SQL wildcards (``%`` any text, ``_`` one character, ``\\`` escapes);
  ``ilike`` ignores case. Sorting puts missing values last in both directions.
- Results are new DataFrames (copies that keep your frame's index labels, so
  ``orders.loc[result.index]`` finds the rows); the model sees a compact bounded rendering.

Writes and "in place"
---------------------

The connector holds a reference to the very DataFrame object you passed. After Approve (and only
then), that object is changed in place: any variable bound to it, like ``orders`` above, sees
the new rows or values, and ``id(orders)`` does not change.

- **append**: the rows are added at the end, with the frame's dtypes exactly (values are
  converted as for filters; a value that does not fit, such as a missing value in an ``int64``
  or ``bool`` column or a value outside a categorical's categories, is refused before anything
  is written). New rows get the index labels after the largest one (``0, 1, ...`` for an empty
  frame); a ``RangeIndex`` stays a ``RangeIndex``. Frames with any other index (strings,
  timestamps, a MultiIndex) cannot be made writable: appended rows would have no label to use;
  ``reset_index()`` first. pandas has no in-place append (and is deprecating ``inplace=``), so
  the result is built with ``pd.concat`` and the object itself takes it over through public
  operations that change it: its columns are taken out, its index grows by ``.loc``
  enlargement (cheap with no columns), and the result's columns are put back. If a step fails,
  the frame is put back as it was. Cost: about one copy of the frame, as with ``pd.concat``.
- The frame is locked while a tool reads or writes it: calls of one turn run concurrently,
  and an approved append and update never interleave.
- **update**: ``frame.loc[matching_rows, column] = value`` for each value, all values converted
  before the first is written, so a refused value changes nothing.
- Not changed: objects that are not the one you passed. Rebinding your variable
  (``orders = orders[orders.total > 0]``, ``orders = pd.concat(...)``) gives you a new object
  that the agent does not see (build the connector again); frames derived earlier (slices,
  ``orders.copy()``, the results in ``thread.frames``) keep their contents, as copy-on-write
  pandas does.
- The approval card shows the rows to append as a DataFrame, or the changes, the filter and the
  number of rows matching now; the rows are matched again when the write runs.
- Calls whose arguments cannot work (an unknown column, a value that does not fit) are answered
  with an error at once instead of asking you to approve something that would fail; such a call
  never writes.
"""

from __future__ import annotations

import contextlib
import math
import re
import threading
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from pandas.api import types as ptypes

from loom_nb._errors import UserError
from loom_nb._messages import arguments_digest
from loom_nb._query import (
    IDENTIFIER,
    RESERVED,
    Filter,
    Select,
    TableSpec,
    _column,
    _int,
    _table,
    check_max_rows,
    filters_schema,
    insert_schema,
    parse_filters,
    parse_insert,
    parse_select,
    parse_tables,
    parse_update,
    select_schema,
    update_schema,
)
from loom_nb._render import frame_for_model
from loom_nb._tools import Connector, Tool, ToolInputError, ToolOutput, connector, tool

__all__ = ["AGGREGATE_FUNCTIONS", "frame_tools"]

AGGREGATE_FUNCTIONS: tuple[str, ...] = ("count", "sum", "mean", "min", "max")
_OPTIONS = ("frame", "description", "columns", "write")
#: Category values shown per column by list_tables, and their length.
_MAX_CATEGORIES = 20
_MAX_CATEGORY_CHARS = 40


def frame_tools(
    frames: Mapping[str, Any],
    *,
    max_rows: int = 50,
    approve_writes: bool = True,
    name: str = "frames",
) -> Connector:
    """Tools over DataFrames in your notebook: list, select, aggregate, and optional writes.

    ``frames`` maps a table name to a DataFrame, or to options ``{"frame": df, "description":
    "...", "columns": [...], "write": True}``. Everything is checked here: names are plain
    identifiers, options are known, listed columns exist, values are DataFrames, and writable
    frames have an integer index. See the module documentation for the exact semantics.
    """
    max_rows = check_max_rows(max_rows)
    if not isinstance(approve_writes, bool):
        raise UserError(f"approve_writes must be True or False, got {approve_writes!r}")
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_-]{1,40}", name):
        raise UserError(
            f"name={name!r} must be 1-40 letters, digits, '_' or '-' (it prefixes the tool names)"
        )
    if not isinstance(frames, Mapping) or not frames:
        raise UserError('frames must be a non-empty dict like {"orders": orders_df}')
    options: dict[str, Mapping[str, Any]] = {}
    for table, value in frames.items():
        if isinstance(value, pd.DataFrame):
            options[table] = {"frame": value}
        elif isinstance(value, Mapping):
            options[table] = value
        else:
            raise UserError(
                f"frames[{table!r}] must be a DataFrame or a dict of options with 'frame', "
                f"got {type(value).__name__}"
            )
    # Names, unknown options, column lists, description and write flags: the shared rules.
    specs = parse_tables(options, allowed_options=_OPTIONS)
    data: dict[str, pd.DataFrame] = {}
    for table, spec in specs.items():
        frame = options[table].get("frame")
        if not isinstance(frame, pd.DataFrame):
            raise UserError(
                f"frames[{table!r}]['frame'] must be a pandas DataFrame, got {type(frame).__name__}"
            )
        _check_frame(table, spec, frame)
        data[table] = frame
    return _FrameConnector(specs, data, max_rows, approve_writes, name).connector()


def _check_frame(table: str, spec: TableSpec, frame: pd.DataFrame) -> None:
    labels = list(frame.columns)
    if len(set(map(str, labels))) != len(labels):
        raise UserError(f"frame {table!r} has duplicate column names; make them unique first")
    if spec.columns is not None:
        missing = [c for c in spec.columns if c not in labels]
        if missing:
            raise UserError(
                f"frames[{table!r}]['columns'] names {missing}, which the frame does not have; "
                f"its columns are {[str(c) for c in labels]}"
            )
    else:
        bad = [c for c in labels if not _usable(c)]
        if bad:
            raise UserError(
                f"frame {table!r} has columns the agent could not name: {bad}. Column names must "
                "be plain identifiers (letters, digits, '_') and not one of "
                f"{sorted(RESERVED)}. Rename them (df.rename(columns=..., inplace=True)) or "
                f"list the usable ones in frames[{table!r}]['columns']"
            )
    if spec.write:
        if not _integer_index(frame.index):
            raise UserError(
                f"frame {table!r} is writable but has a {type(frame.index).__name__}: appended "
                "rows would have no index label to take. Use an integer index "
                "(df.reset_index() keeps the current index as a column) or write=False"
            )
        if spec.columns is not None:
            for col in labels:
                if col not in spec.columns and not _holds_missing(frame[col].dtype):
                    raise UserError(
                        f"frame {table!r} is writable, but column {col!r} ({frame[col].dtype}) is "
                        "not in 'columns', so appended rows would leave it empty, which its "
                        f"dtype cannot hold. Add it to 'columns' or convert it "
                        "(for example to 'Int64' or 'boolean')"
                    )


def _usable(label: Any) -> bool:
    return (
        isinstance(label, str)
        and bool(IDENTIFIER.match(label))
        and label.lower() not in RESERVED
    )


def _integer_index(index: pd.Index) -> bool:
    return not isinstance(index, pd.MultiIndex) and (
        isinstance(index, pd.RangeIndex) or ptypes.is_integer_dtype(index.dtype)
    )


def _holds_missing(dtype: Any) -> bool:
    """Can a column of ``dtype`` hold a missing value without changing dtype?"""
    return not (isinstance(dtype, np.dtype) and dtype.kind in "biu")


# ---- values: what a JSON value means for a column ------------------------------------------------


def _kind(dtype: Any) -> str:
    """One word for how values of ``dtype`` are converted."""
    if isinstance(dtype, pd.CategoricalDtype):
        return "category"
    if ptypes.is_bool_dtype(dtype):
        return "bool"
    if ptypes.is_integer_dtype(dtype):
        return "int"
    if ptypes.is_float_dtype(dtype):
        return "float"
    if ptypes.is_datetime64_any_dtype(dtype):
        return "datetime"
    if ptypes.is_timedelta64_dtype(dtype):
        return "timedelta"
    if isinstance(dtype, pd.StringDtype):
        return "text"
    if isinstance(dtype, np.dtype) and dtype.kind == "O":
        return "object"
    return "other"


def _is_text(col: pd.Series) -> bool:
    kind = _kind(col.dtype)
    if kind == "text":
        return True
    if kind == "object":
        return bool(ptypes.infer_dtype(col, skipna=True) in ("string", "empty"))
    if kind == "category":
        return _is_text(pd.Series(col.cat.categories))
    return False


class _Bad(Exception):
    """A value that does not fit a column; the message completes "column 'x' ..."."""


def _convert(value: Any, dtype: Any, *, text_like: bool = False) -> Any:
    """``value`` (a JSON scalar) as a value of ``dtype``; raises :class:`_Bad`."""
    kind = _kind(dtype)
    if kind == "category":
        categories = dtype.categories
        return _convert(value, categories.dtype, text_like=ptypes.is_string_dtype(categories))
    if isinstance(value, (dict, list)):
        raise _Bad(f"takes a single value, not {type(value).__name__}")
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        if isinstance(value, (int, float)) and value in (0, 1):
            return bool(value)
        raise _Bad(f"holds true/false values; {value!r} is not one")
    if kind in ("int", "float"):
        number = _number(value)
        if number is None:
            raise _Bad(f"holds numbers ({dtype}); {value!r} is not a number")
        if kind == "int" and isinstance(number, float) and number.is_integer():
            return int(number)
        return number
    if kind == "datetime":
        return _timestamp(value, getattr(dtype, "tz", None))
    if kind == "timedelta":
        if not isinstance(value, str) or isinstance(value, bool):
            raise _Bad(f"holds durations; give a string like '2 days' or 'PT3H', not {value!r}")
        try:
            return pd.Timedelta(value)
        except (ValueError, TypeError, OverflowError):
            raise _Bad(f"holds durations; {value!r} is not one (try '2 days 03:00:00')") from None
    if kind == "text" or text_like:
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        raise _Bad(f"holds text; {value!r} is not text")
    if kind == "object":
        return value
    raise _Bad(f"has dtype {dtype}, which this connector cannot compare or write")


def _number(value: Any) -> int | float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return None if isinstance(value, float) and math.isnan(value) else value
    if isinstance(value, str):
        text = value.strip()
        if not text or "_" in text:
            return None
        try:
            return int(text)
        except ValueError:
            pass
        try:
            number = float(text)
        except ValueError:
            return None
        return None if math.isnan(number) else number
    return None


def _timestamp(value: Any, tz: Any) -> pd.Timestamp:
    if not isinstance(value, str):
        raise _Bad(
            f"holds timestamps; give an ISO 8601 string like '2024-05-01' or "
            f"'2024-05-01T13:30:00+00:00', not {value!r}"
        )
    try:
        ts = pd.Timestamp(value)
    except (ValueError, TypeError, OverflowError):
        ts = None
    if ts is None or ts is pd.NaT or pd.isna(ts):
        raise _Bad(
            f"holds timestamps; {value!r} is not a date or time (use ISO 8601 like "
            "'2024-05-01' or '2024-05-01T13:30:00+00:00')"
        )
    if tz is not None:
        try:
            return ts.tz_localize(tz) if ts.tzinfo is None else ts.tz_convert(tz)
        except (ValueError, TypeError, OverflowError) as exc:
            raise _Bad(f"holds times in {tz}; {value!r} cannot be read there: {exc}") from None
    if ts.tzinfo is not None:
        raise _Bad(
            f"holds times without a time zone; give {value!r} without an offset, like "
            f"'{ts.tz_localize(None).isoformat()}'"
        )
    return ts


# ---- LIKE patterns ------------------------------------------------------------------------------


def like_regex(pattern: str) -> str:
    """A regex (for ``re.fullmatch`` with DOTALL) matching what SQL ``LIKE pattern`` matches.

    ``%`` is any text, ``_`` one character, and a backslash makes the next character literal.
    Each ``%``-separated piece is matched at its leftmost place and never revisited (an atomic
    group written as a lookahead and a back-reference), which is how LIKE can be decided, so a
    pattern like ``%a%a%a%a%b`` takes linear time instead of backtracking.
    """
    pieces: list[str] = [""]
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            pieces[-1] += re.escape(pattern[i + 1])
            i += 2
            continue
        if ch == "%":
            pieces.append("")
        elif ch == "_":
            pieces[-1] += "."
        else:
            pieces[-1] += re.escape(ch)
        i += 1
    if len(pieces) == 1:
        return pieces[0]
    first, *middle, last = pieces
    out = first
    for n, piece in enumerate((p for p in middle if p), start=1):
        out += f"(?=(.*?{piece}))\\{n}"
    return out + ".*" + last


def _like(col: pd.Series, pattern: str, ignore_case: bool) -> np.ndarray:
    flags = re.DOTALL | (re.IGNORECASE if ignore_case else 0)
    regex = re.compile(like_regex(pattern), flags)
    values = col.astype(object).to_numpy()
    return np.fromiter(
        (isinstance(v, str) and regex.fullmatch(v) is not None for v in values),
        dtype=bool,
        count=len(values),
    )


# ---- filters ------------------------------------------------------------------------------------


def _as_bool(result: Any) -> np.ndarray:
    if isinstance(result, pd.Series):
        return np.asarray(result.to_numpy(dtype=bool, na_value=False), dtype=bool)
    return np.asarray(result, dtype=bool)


_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "eq": lambda c, v: c == v,
    "neq": lambda c, v: c != v,
    "gt": lambda c, v: c > v,
    "gte": lambda c, v: c >= v,
    "lt": lambda c, v: c < v,
    "lte": lambda c, v: c <= v,
}


def _filter_mask(df: pd.DataFrame, table: str, f: Filter) -> np.ndarray:
    col = df[f.column]
    if f.op == "is_null":
        nulls = _as_bool(col.isna())
        return ~nulls if f.negate else nulls
    valid = _as_bool(col.notna())
    try:
        if f.op in ("like", "ilike"):
            if not _is_text(col):
                raise ToolInputError(
                    f"{f.op} works on text columns; {table}.{f.column} is {col.dtype}. "
                    "Use eq, gt, lt or in instead"
                )
            hit = _like(col, f.value, f.op == "ilike")
        elif f.op == "in":
            values = [_convert_for(col, v) for v in f.value]
            hit = _as_bool(col.isin(values))
        else:
            value = _convert_for(col, f.value)
            ordered = f.op not in ("eq", "neq")
            if ordered and isinstance(col.dtype, pd.CategoricalDtype) and not col.cat.ordered:
                raise ToolInputError(
                    f"{table}.{f.column} is an unordered category; use eq, neq or in "
                    f"(its values: {_category_list(col)})"
                )
            hit = _as_bool(_COMPARE[f.op](col, value))
    except _Bad as exc:
        raise ToolInputError(f"column {table}.{f.column} {exc}") from None
    except (TypeError, ValueError, OverflowError) as exc:
        raise ToolInputError(
            f"cannot apply {f.op} to {table}.{f.column} ({col.dtype}) with {f.value!r}: {exc}"
        ) from None
    out: np.ndarray = (~hit & valid) if f.negate else (hit & valid)
    return out


def _convert_for(col: pd.Series, value: Any) -> Any:
    if _kind(col.dtype) == "object" and _is_text(col):
        return _convert(value, col.dtype, text_like=True)
    return _convert(value, col.dtype)


def _value_to_write(col: pd.Series, value: Any) -> Any:
    """``value`` converted for ``col``, and proven to fit its dtype; raises :class:`_Bad`."""
    dtype = col.dtype
    converted = _convert_for(col, value)
    if isinstance(dtype, pd.CategoricalDtype):
        if converted not in dtype.categories:
            raise _Bad(f"takes one of its categories ({_category_list(col)})")
        return converted
    if _kind(dtype) == "int" and isinstance(converted, float):
        raise _Bad(f"holds whole numbers ({dtype}); {value!r} is not a whole number")
    try:
        pd.array([converted], dtype=dtype)
    except (TypeError, ValueError, OverflowError):
        raise _Bad(f"({dtype}) cannot hold {value!r}") from None
    return converted


def _mask(df: pd.DataFrame, table: str, filters: Sequence[Filter]) -> np.ndarray:
    mask = np.ones(len(df), dtype=bool)
    for f in filters:
        mask &= _filter_mask(df, table, f)
    return mask


def _category_list(col: pd.Series) -> str:
    cats = [str(c)[:_MAX_CATEGORY_CHARS] for c in col.cat.categories[:_MAX_CATEGORIES]]
    more = len(col.cat.categories) - len(cats)
    return ", ".join(cats) + (f", … ({more} more)" if more > 0 else "")


def _n(count: int, what: str) -> str:
    return f"{count:,} {what}{'' if count == 1 else 's'}"


def _describe_filters(filters: Sequence[Filter]) -> str:
    words = {"eq": "=", "neq": "!=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<=",
             "like": "LIKE", "ilike": "ILIKE", "in": "IN"}
    parts = []
    for f in filters:
        if f.op == "is_null":
            parts.append(f"{f.column} IS {'NOT ' if f.negate else ''}NULL")
            continue
        value = f"({', '.join(map(repr, f.value))})" if f.op == "in" else repr(f.value)
        text = f"{f.column} {words[f.op]} {value}"
        parts.append(f"NOT ({text})" if f.negate else text)
    return " AND ".join(parts)


# ---- aggregates ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Aggregate:
    fn: str
    #: None: count rows.
    column: str | None

    @property
    def output(self) -> str:
        return self.fn if self.column is None else f"{self.fn}_{self.column}"


@dataclass(frozen=True)
class AggregateQuery:
    table: str
    group_by: tuple[str, ...]
    aggregates: tuple[Aggregate, ...]
    filters: tuple[Filter, ...]
    order: tuple[tuple[str, bool], ...]
    limit: int
    offset: int


def aggregate_schema(tables: Mapping[str, TableSpec], max_rows: int) -> dict[str, Any]:
    base = select_schema(tables, max_rows)["properties"]
    column = base["columns"]["items"]
    return {
        "type": "object",
        "properties": {
            "table": base["table"],
            "group_by": {
                "type": "array",
                "items": column,
                "description": "Columns to group by; omit for one summary row over all matches.",
            },
            "aggregates": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "fn": {"type": "string", "enum": list(AGGREGATE_FUNCTIONS)},
                        "column": {
                            **column,
                            "description": "Omit with fn=count to count rows.",
                        },
                    },
                    "required": ["fn"],
                    "additionalProperties": False,
                },
                "description": "Output columns are named fn_column, or count for a row count. "
                "Default: [{fn: count}].",
            },
            "filters": filters_schema(tables),
            "order": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "column": {
                            "type": "string",
                            "pattern": IDENTIFIER.pattern,
                            "description": "A group_by column or an output name like sum_total.",
                        },
                        "desc": {"type": "boolean"},
                    },
                    "required": ["column"],
                    "additionalProperties": False,
                },
            },
            "limit": {
                "type": "integer",
                "minimum": 0,
                "description": f"At most {max_rows} groups come back; a larger limit is cut to that.",
            },
            "offset": {"type": "integer", "minimum": 0},
        },
        "required": ["table"],
        "additionalProperties": False,
    }


def parse_aggregate(
    args: Mapping[str, Any], tables: Mapping[str, TableSpec], max_rows: int
) -> AggregateQuery:
    spec = _table(tables, args.get("table"))
    raw_group = args.get("group_by") or []
    if not isinstance(raw_group, list):
        raise ToolInputError("group_by must be a list of column names")
    group_by = tuple(dict.fromkeys(_column(spec, c) for c in raw_group))
    raw_aggs = args.get("aggregates") or [{"fn": "count"}]
    if not isinstance(raw_aggs, list):
        raise ToolInputError("aggregates must be a list of {fn, column} objects")
    aggs: list[Aggregate] = []
    for i, item in enumerate(raw_aggs):
        if not isinstance(item, Mapping) or set(item) - {"fn", "column"}:
            raise ToolInputError(f"aggregates[{i}] must be an object with 'fn' and 'column'")
        fn = item.get("fn")
        if fn not in AGGREGATE_FUNCTIONS:
            raise ToolInputError(
                f"aggregates[{i}].fn {fn!r} is not one of {list(AGGREGATE_FUNCTIONS)}"
            )
        col = item.get("column")
        if col is None:
            if fn != "count":
                raise ToolInputError(f"aggregates[{i}]: {fn} needs a column")
        else:
            col = _column(spec, col)
        agg = Aggregate(fn, col)
        if agg.output in group_by:
            raise ToolInputError(
                f"aggregates[{i}] would be named {agg.output!r}, like a group_by column"
            )
        if agg not in aggs:
            aggs.append(agg)
    outputs = set(group_by) | {a.output for a in aggs}
    order: list[tuple[str, bool]] = []
    raw_order = args.get("order") or []
    if not isinstance(raw_order, list):
        raise ToolInputError("order must be a list of {column, desc} objects")
    for i, item in enumerate(raw_order):
        if not isinstance(item, Mapping) or set(item) - {"column", "desc"}:
            raise ToolInputError(f"order[{i}] must be an object with 'column' and optional 'desc'")
        name, desc = item.get("column"), item.get("desc", False)
        if name not in outputs:
            raise ToolInputError(
                f"order[{i}].column {name!r} is not an output column; use one of {sorted(outputs)}"
            )
        if not isinstance(desc, bool):
            raise ToolInputError(f"order[{i}].desc must be true or false")
        order.append((name, desc))
    return AggregateQuery(
        table=spec.name,
        group_by=group_by,
        aggregates=tuple(aggs),
        filters=parse_filters(spec, args.get("filters")),
        order=tuple(order),
        limit=min(_int(args.get("limit"), "limit", max_rows), max_rows),
        offset=_int(args.get("offset"), "offset", 0),
    )


def _check_aggregate(table: str, col: pd.Series, agg: Aggregate) -> None:
    kind = _kind(col.dtype)
    if agg.fn in ("sum", "mean"):
        numeric = kind in ("int", "float", "bool", "timedelta")
        ok = numeric or (kind == "datetime" and agg.fn == "mean")
        if not ok:
            raise ToolInputError(
                f"{agg.fn} needs a numeric column; {table}.{agg.column} is {col.dtype}. "
                "Use count, min or max"
            )
    if agg.fn in ("min", "max") and kind == "category" and not col.cat.ordered:
        raise ToolInputError(
            f"{table}.{agg.column} is an unordered category, so it has no {agg.fn}; "
            "group by it instead"
        )


def _apply(target: Any, a: Aggregate) -> Any:
    """One aggregate of a Series or a grouped Series. A sum of no values is missing, as in SQL
    (pandas would say 0)."""
    if a.fn == "sum":
        return target.sum(min_count=1)
    return getattr(target, a.fn)()


def _aggregate(sub: pd.DataFrame, q: AggregateQuery) -> pd.DataFrame:
    if not q.group_by:
        row = {
            a.output: [len(sub) if a.column is None else _apply(sub[a.column], a)]
            for a in q.aggregates
        }
        return pd.DataFrame(row)
    grouped = sub.groupby(list(q.group_by), dropna=False, observed=True, sort=True)
    parts = {
        a.output: grouped.size() if a.column is None else _apply(grouped[a.column], a)
        for a in q.aggregates
    }
    out = pd.DataFrame(parts)
    return out.reset_index()


# ---- the connector ------------------------------------------------------------------------------


@dataclass
class _Plan:
    """A checked write: what will change, computed before anything changes."""

    table: str
    new_rows: pd.DataFrame | None = None
    values: dict[str, Any] | None = None
    mask: np.ndarray | None = None
    where: str = ""


class _FrameConnector:
    def __init__(
        self,
        specs: dict[str, TableSpec],
        frames: dict[str, pd.DataFrame],
        max_rows: int,
        approve_writes: bool,
        name: str,
    ) -> None:
        self.specs = specs
        self.frames = frames
        self.max_rows = max_rows
        self.approve_writes = approve_writes
        self.name = name
        # Tool calls of one turn run concurrently on worker threads: one lock per frame.
        self.locks = {t: threading.RLock() for t in frames}
        # Write calls answered with an error instead of an approval request: they never write.
        self._refused: Counter[str] = Counter()
        self._refused_lock = threading.Lock()

    # -- helpers --

    def _columns(self, table: str) -> list[str]:
        """The columns the agent may use, as the frame is now."""
        spec, df = self.specs[table], self.frames[table]
        if spec.columns is not None:
            return list(spec.columns)
        return [c for c in df.columns if _usable(c)]

    def _check_columns(self, table: str, names: Sequence[str]) -> None:
        present = self._columns(table)
        frame_columns = set(self.frames[table].columns)
        for n in names:
            if n not in present or n not in frame_columns:
                raise ToolInputError(
                    f"{table!r} has no column {n!r}; its columns are {present}"
                )

    def _source(self, table: str) -> str:
        return f"{self.name}.{table}"

    # -- list --

    def list_tables(self) -> ToolOutput:
        entries: list[dict[str, Any]] = []
        lines = [
            f"{len(self.specs)} table(s). Read with {self.name}_select, summarize with "
            f"{self.name}_aggregate."
        ]
        for table, spec in self.specs.items():
            with self.locks[table]:
                df = self.frames[table]
                columns = []
                for c in self._columns(table):
                    if c not in df.columns:
                        continue
                    entry: dict[str, Any] = {"name": c, "dtype": str(df[c].dtype)}
                    if isinstance(df[c].dtype, pd.CategoricalDtype):
                        entry["categories"] = _category_list(df[c])
                    columns.append(entry)
                rows = len(df)
            entries.append({
                "table": table,
                "description": spec.description,
                "rows": rows,
                "columns": columns,
                "writable": spec.write,
            })
            head = f"- {table}: {rows:,} rows, {'writable' if spec.write else 'read-only'}"
            lines.append(head + (f". {spec.description}" if spec.description else ""))
            for entry in columns:
                extra = f" [{entry['categories']}]" if "categories" in entry else ""
                lines.append(f"    {entry['name']}: {entry['dtype']}{extra}")
        return ToolOutput("\n".join(lines), entries)

    # -- select --

    def select(self, args: dict[str, Any]) -> ToolOutput:
        q: Select = parse_select(args, self.specs, self.max_rows)
        with self.locks[q.table]:
            df = self.frames[q.table]
            columns = list(q.columns) if q.columns is not None else self._columns(q.table)
            self._check_columns(
                q.table, [*columns, *(f.column for f in q.filters), *(c for c, _ in q.order)]
            )
            mask = _mask(df, q.table, q.filters)
            matched = int(mask.sum())
            view = df.loc[mask] if matched < len(df) else df
            window = slice(q.offset, q.offset + q.limit)
            if q.order:
                # Sort only the key columns, then take the page's rows: the other columns of
                # every matching row are never reordered.
                desc: dict[str, bool] = {}
                for column, descending in q.order:
                    desc.setdefault(column, descending)  # the first mention of a column decides
                keys = list(desc)
                try:
                    positions = (
                        view[keys]
                        .reset_index(drop=True)
                        .sort_values(
                            keys,
                            ascending=[not desc[k] for k in keys],
                            na_position="last",
                            kind="stable",
                        )
                        .index.to_numpy()
                    )
                except TypeError as exc:
                    raise ToolInputError(f"cannot sort {q.table} by {q.order}: {exc}") from None
                page = view.iloc[positions[window]][columns].copy()
            else:
                page = view.iloc[window][columns].copy()
        return ToolOutput(self._page_text(q.table, page, matched, q.offset, q.count), page)

    def _page_text(
        self,
        table: str,
        page: pd.DataFrame,
        matched: int,
        offset: int,
        count: bool,
        what: str = "row",
    ) -> str:
        """The rendering of one page, after a line that says how to get the rest."""
        last = offset + len(page)
        notes = [f"{_n(matched, what)} match."] if count else []
        if len(page) and last < matched:
            notes.append(f"More match: the next page starts at offset={last}.")
        elif not len(page) and matched and offset >= matched:
            notes.append(f"offset={offset} is past the last match.")
        rendered = frame_for_model(
            page,
            source=self._source(table),
            max_rows=self.max_rows,
            total_rows=matched if count else None,
            offset=offset,
            limit_reached=not count and last < matched,
        )
        return (" ".join(notes) + "\n" if notes else "") + rendered

    # -- aggregate --

    def aggregate(self, args: dict[str, Any]) -> ToolOutput:
        q = parse_aggregate(args, self.specs, self.max_rows)
        used = [*q.group_by, *(a.column for a in q.aggregates if a.column is not None)]
        with self.locks[q.table]:
            df = self.frames[q.table]
            self._check_columns(q.table, [*used, *(f.column for f in q.filters)])
            for a in q.aggregates:
                if a.column is not None:
                    _check_aggregate(q.table, df[a.column], a)
            mask = _mask(df, q.table, q.filters)
            sub = df.loc[mask, list(dict.fromkeys(used))] if mask.sum() < len(df) else df[
                list(dict.fromkeys(used))
            ]
            try:
                out = _aggregate(sub, q)
            except (TypeError, ValueError) as exc:
                raise ToolInputError(f"cannot aggregate {q.table}: {exc}") from None
        if q.order:
            try:
                out = out.sort_values(
                    [c for c, _ in q.order],
                    ascending=[not d for _, d in q.order],
                    na_position="last",
                    kind="stable",
                )
            except TypeError as exc:
                raise ToolInputError(f"cannot sort the groups by {q.order}: {exc}") from None
        groups = len(out)
        page = out.iloc[q.offset : q.offset + q.limit].reset_index(drop=True)
        return ToolOutput(
            self._page_text(
                q.table, page, groups, q.offset, True, "group" if q.group_by else "row"
            ),
            page,
        )

    # -- writes --

    def _plan_append(self, args: dict[str, Any]) -> _Plan:
        ins = parse_insert(args, self.specs)
        table = ins.table
        df = self.frames[table]
        allowed = self._columns(table)
        self._check_columns(table, sorted({c for r in ins.rows for c in r}))
        if not _integer_index(df.index):
            raise ToolInputError(
                f"{table!r} no longer has an integer index, so rows cannot be appended"
            )
        columns: dict[Any, Any] = {}
        for col in df.columns:
            dtype = df[col].dtype
            values: list[Any] = []
            for i, row in enumerate(ins.rows):
                value = row.get(col) if col in allowed else None
                if value is None:
                    if not _holds_missing(dtype):
                        raise ToolInputError(
                            f"rows[{i}] has no value for {table}.{col} ({dtype}), which cannot "
                            "be empty"
                        )
                    values.append(None)
                    continue
                try:
                    converted = _value_to_write(df[col], value)
                except _Bad as exc:
                    raise ToolInputError(f"rows[{i}]: column {table}.{col} {exc}") from None
                values.append(converted)
            columns[col] = values
        start = int(df.index.max()) + 1 if len(df) else 0
        index: pd.Index = pd.RangeIndex(start, start + len(ins.rows), name=df.index.name)
        try:
            new_rows = pd.DataFrame(
                {c: pd.Series(v, dtype=df[c].dtype, index=index) for c, v in columns.items()},
                index=index,
                columns=df.columns,
            )
        except (TypeError, ValueError, OverflowError) as exc:
            raise ToolInputError(f"the rows do not fit the columns of {table!r}: {exc}") from None
        return _Plan(table, new_rows=new_rows)

    def _plan_update(self, args: dict[str, Any]) -> _Plan:
        up = parse_update(args, self.specs)
        table = up.table
        df = self.frames[table]
        self._check_columns(table, [*up.values, *(f.column for f in up.filters)])
        values: dict[str, Any] = {}
        for col, value in up.values.items():
            dtype = df[col].dtype
            if value is None:
                if not _holds_missing(dtype):
                    raise ToolInputError(f"{table}.{col} ({dtype}) cannot be set to empty (null)")
                values[col] = None
                continue
            try:
                converted = _value_to_write(df[col], value)
            except _Bad as exc:
                raise ToolInputError(f"values: column {table}.{col} {exc}") from None
            values[col] = converted
        mask = _mask(df, table, up.filters)
        return _Plan(table, values=values, mask=mask, where=_describe_filters(up.filters))

    def _table_of(self, args: dict[str, Any]) -> str:
        table = args.get("table")
        return table if isinstance(table, str) and table in self.specs else ""

    def _lock(self, table: str) -> Any:
        return self.locks[table] if table else contextlib.nullcontext()

    def needs_approval(
        self, plan: Callable[[dict[str, Any]], _Plan]
    ) -> Callable[[dict[str, Any]], bool]:
        """Ask for approval only for calls that can work; the others are answered at once."""

        def rule(args: dict[str, Any]) -> bool:
            if not self.approve_writes:
                return False
            try:
                with self._lock(self._table_of(args)):
                    plan(args)
            except ToolInputError:
                with self._refused_lock:
                    self._refused[arguments_digest(args)] += 1
                return False
            return True

        return rule

    def _write(
        self,
        args: dict[str, Any],
        plan: Callable[[dict[str, Any]], _Plan],
        write: Callable[[_Plan], ToolOutput],
    ) -> ToolOutput:
        """Run a write. A call that was answered instead of being sent for approval (its
        arguments could not work when it was checked) never writes, even if they work now."""
        refused = False
        if self.approve_writes:
            digest = arguments_digest(args)
            with self._refused_lock:
                if self._refused[digest] > 0:
                    refused = True
                    self._refused[digest] -= 1
                    if not self._refused[digest]:
                        del self._refused[digest]
        with self._lock(self._table_of(args)):
            checked = plan(args)  # raises the precise error for the model
            if refused:
                raise ToolInputError(
                    "the table changed while this call was checked; nothing was written. "
                    "Send the call again to ask the user for approval"
                )
            return write(checked)

    def append(self, args: dict[str, Any]) -> ToolOutput:
        return self._write(args, self._plan_append, self._do_append)

    def _do_append(self, plan: _Plan) -> ToolOutput:
        assert plan.new_rows is not None
        table, added = plan.table, plan.new_rows
        df = self.frames[table]
        _append_in_place(df, added)
        text = f"Appended {len(added)} row(s) to {table!r}; it now has {len(df):,} rows.\n"
        text += frame_for_model(added, source=self._source(table), max_rows=self.max_rows)
        return ToolOutput(text, added.iloc[: self.max_rows].copy())

    def update(self, args: dict[str, Any]) -> ToolOutput:
        return self._write(args, self._plan_update, self._do_update)

    def _do_update(self, plan: _Plan) -> ToolOutput:
        assert plan.values is not None and plan.mask is not None
        table, mask = plan.table, plan.mask
        df = self.frames[table]
        for col, value in plan.values.items():
            df.loc[mask, col] = value
        count = int(mask.sum())
        changed = df.loc[mask].iloc[: self.max_rows][self._columns(table)].copy()
        text = f"Updated {count:,} row(s) of {table!r} where {plan.where}.\n"
        text += frame_for_model(
            changed, source=self._source(table), max_rows=self.max_rows, total_rows=count
        )
        return ToolOutput(text, changed)

    def preview_append(self, args: dict[str, Any]) -> Any:
        with self._lock(self._table_of(args)):
            plan = self._plan_append(args)
        return {"table": plan.table, "rows": plan.new_rows}

    def preview_update(self, args: dict[str, Any]) -> Any:
        with self._lock(self._table_of(args)):
            plan = self._plan_update(args)
            assert plan.mask is not None
            table, df = plan.table, self.frames[plan.table]
            rows = df.loc[plan.mask].iloc[: self.max_rows][self._columns(table)].copy()
        return {
            "table": table,
            "changes": plan.values,
            "where": plan.where,
            "rows_matched": int(plan.mask.sum()),
            "matching_rows": rows,
        }

    # -- tools --

    def connector(self) -> Connector:
        n, specs, max_rows = self.name, self.specs, self.max_rows
        none: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
        tools: dict[str, Tool] = {
            f"{n}_list_tables": tool(
                name=f"{n}_list_tables",
                description=(
                    "List the tables (pandas DataFrames) you can query: name, description, row "
                    "count, columns with dtypes (and the values of categorical columns), and "
                    "whether you may write to it. Call this first."
                ),
                input=none,
                run=lambda _args: self.list_tables(),
            ),
            f"{n}_select": tool(
                name=f"{n}_select",
                description=(
                    "Read rows of one table. filters (all must match): op is eq, neq, gt, gte, "
                    "lt, lte, like / ilike (SQL wildcards: % any text, _ one character; ilike "
                    "ignores case), in (a list of values) or is_null; not=true negates. Missing "
                    "values match only is_null. Give timestamps as ISO 8601 strings. order sorts "
                    f"(missing values last). At most {max_rows} rows per call: page with offset; "
                    "count=true also returns the number of matching rows."
                ),
                input=select_schema(specs, max_rows),
                run=self.select,
            ),
            f"{n}_aggregate": tool(
                name=f"{n}_aggregate",
                description=(
                    "Summarize one table: group_by columns and aggregates [{fn, column}] with fn "
                    "count, sum, mean, min or max (count without a column counts rows). Output "
                    "columns are named fn_column (count for the row count); order may use them, "
                    f"e.g. [{{column: 'sum_total', desc: true}}]. Filters as in {n}_select. At "
                    f"most {max_rows} groups per call; the total number of groups is reported."
                ),
                input=aggregate_schema(specs, max_rows),
                run=self.aggregate,
            ),
        }
        if any(s.write for s in specs.values()):
            gate = (
                " The user approves each call before anything is written."
                if self.approve_writes
                else ""
            )
            tools[f"{n}_append"] = tool(
                name=f"{n}_append",
                description=(
                    "Append rows to a writable table: rows is a list of {column: value}; "
                    "omitted columns are left empty where the column allows it." + gate
                ),
                input=insert_schema(specs),
                run=self.append,
                needs_approval=self.needs_approval(self._plan_append),
                preview=self.preview_append,
            )
            tools[f"{n}_update"] = tool(
                name=f"{n}_update",
                description=(
                    "Set values on the rows of a writable table that match all filters (same "
                    f"filters as {n}_select; at least one is required)." + gate
                ),
                input=update_schema(specs),
                run=self.update,
                needs_approval=self.needs_approval(self._plan_update),
                preview=self.preview_update,
            )
        return connector(n, tools)


def _append_in_place(df: pd.DataFrame, new_rows: pd.DataFrame) -> None:
    """Add ``new_rows`` (same columns, same dtypes) to the object ``df`` itself.

    pandas has no in-place append, and its ``inplace=`` keywords are being deprecated (PDEP-8).
    The public operations that change the object itself are column deletion and insertion,
    ``.loc`` enlargement and setting ``.index``/``.columns``. So: build the result with
    ``pd.concat`` (dtypes kept exactly: categoricals, tz-aware timestamps, nullable integers),
    take the columns out of ``df``, grow its index by enlargement (cheap without columns), and
    put the columns of the result back. If a step fails, ``df`` is put back as it was.
    """
    combined = pd.concat([df, new_rows])
    labels, index = df.columns, df.index
    saved = [df.iloc[:, i] for i in range(df.shape[1])]
    try:
        for label in list(labels):
            del df[label]
        for label in new_rows.index:
            df.loc[label] = pd.Series(dtype=object)
        df.index = combined.index
        for i, label in enumerate(labels):
            df.insert(i, label, combined.iloc[:, i].array, allow_duplicates=True)
        df.columns = labels
    except BaseException:
        _restore(df, labels, index, saved)
        raise


def _restore(df: pd.DataFrame, labels: pd.Index, index: pd.Index, saved: list[pd.Series]) -> None:
    for label in list(df.columns):
        del df[label]
    if len(df) != len(index):
        with warnings.catch_warnings():  # the one way to shrink the object itself
            warnings.simplefilter("ignore")
            df.drop(index=df.index[len(index) :], inplace=True)
    df.index = index
    for i, (label, col) in enumerate(zip(labels, saved, strict=True)):
        df.insert(i, label, col.array, allow_duplicates=True)
    df.columns = labels
