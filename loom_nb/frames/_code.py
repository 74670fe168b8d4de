"""The pandas code of each frames call: run after defining each table's DataFrame under the
table's name, it gives the very DataFrame the tool returned.

Every piece mirrors the tool it stands for: filter values converted to the column's dtype as
the filter did (read from the frame as it is now), SQL's rule that a missing value matches no
comparison, LIKE as the same regular expression, the same stable sort with missing values
last, the same page, the same groupby. ``tests/frames/test_code.py`` runs the code against the
tools on random calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from loom_nb._code import CodeContext, py_literal, saved_columns, shared, variable_for
from loom_nb._embed import embed
from loom_nb._tables.grammar import (
    Aggregate,
    Filter,
    GroupKey,
    parse_aggregate,
    parse_insert,
    parse_select,
    parse_update,
)
from loom_nb._tables.options import Relationship
from loom_nb.frames._aggregate import FRAME_AGGREGATES
from loom_nb.frames._allowlist import AllowedFrames
from loom_nb.frames._filters import like_regex
from loom_nb.frames._joins import inner_tables, join, joined_columns
from loom_nb.frames._values import BadValue, dtype_kind, holds_missing, value_for, value_to_write

_COMPARE = {"eq": "==", "neq": "!=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
_SORT = 'na_position="last", kind="stable"'


def select_code(tables: AllowedFrames, args: dict[str, Any], ctx: CodeContext) -> str:
    q = parse_select(args, tables.specs, tables.frame_rows, tables.relationships)
    frame = _frame(tables, q.table, ctx)
    df = tables.frames.get(q.table)
    saved = saved_columns(ctx) if q.columns is None else None
    columns = list(q.columns) if q.columns is not None else _usable(tables, q.table, saved)
    # (with a saved frame, data is not None: not decoded to know it)
    if columns is not None and q.joins and q.columns is None and saved is None and ctx.data is None:
        columns = [*columns, *(f"{r.other}.{c}" for r in q.joins for c in tables.columns(r.other))]
    names = [*(columns or []), *(f.column for f in q.filters), *(c for c, _ in q.order)]
    joined, frame, df = _join(tables, q.table, q.joins, names, q.filters, frame, df, ctx)
    lines, mask = _mask(frame, df, q.filters, ctx, own_frame=not q.joins)
    lines = [*joined, *lines]
    chain = [f"{frame}[{mask}]" if mask else frame]
    if q.order:
        desc: dict[str, bool] = {}
        for column, descending in q.order:
            desc.setdefault(column, descending)  # the first mention of a column decides, too
        keys = list(desc)
        chain.append(_sort(keys, [not desc[k] for k in keys]))
    chain.append(_page(q.offset, q.limit))
    if columns is not None and (df is None or columns != list(df.columns)):
        chain.append(f"[{py_literal(columns)}]")
    lines.append(_assign(ctx.result, chain))
    return "\n".join(lines)


def aggregate_code(tables: AllowedFrames, args: dict[str, Any], ctx: CodeContext) -> str:
    q = parse_aggregate(
        args, tables.specs, tables.frame_rows, FRAME_AGGREGATES, tables.relationships
    )
    frame = _frame(tables, q.table, ctx)
    df = tables.frames.get(q.table)
    names = [
        *(k.column for k in q.group_by),
        *(a.column for a in q.aggregates if a.column is not None),
        *(f.column for f in q.filters),
    ]
    joined, frame, df = _join(tables, q.table, q.joins, names, q.filters, frame, df, ctx)
    lines, mask = _mask(frame, df, q.filters, ctx, own_frame=not q.joins)
    lines = [*joined, *lines]
    source = frame
    if mask:
        source = ctx.name("matched")
        lines.append(f"{source} = {frame}[{mask}]")
    # a percentile of booleans is of 0 and 1, as the tool computes it (quantile refuses bool)
    as_numbers = {
        a.output
        for a in q.aggregates
        if a.fn == "percentile"
        and df is not None
        and a.column in df.columns
        and dtype_kind(df[a.column].dtype) == "bool"
    }
    if q.group_by:
        keys: list[str] = []
        series: list[str] = []  # the keys as Series (a column's by name: of ``source``)
        for k in q.group_by:
            if k.bins is not None:
                keys.append(_bins(source, k, ctx, lines))
                series.append(keys[-1])
                continue
            if k.bucket is None:
                keys.append(py_literal(k.column))
                series.append(f"{source}[{py_literal(k.column)}]")
                continue
            helper = embed("loom_nb.frames._bucket_start", ctx)["bucket_start"]
            name = ctx.name(k.output)
            column = f"{source}[{py_literal(k.column)}]"
            lines.append(f"{name} = {helper}({column}, {py_literal(k.bucket)})")
            keys.append(name)
            series.append(name)
        groups = ctx.name("groups")
        how = "dropna=False, observed=True, sort=True"
        lines.append(f"{groups} = {source}.groupby([{', '.join(keys)}], {how})")
        parts = [
            f"{py_literal(a.output)}: "
            + (
                f"{groups}.size()"
                if a.column is None
                else f'{source}[{py_literal(a.column)}].astype("float64")'
                f".groupby([{', '.join(series)}], {how}).quantile({a.p!r})"
                if a.output in as_numbers
                else _aggregate(groups, a)
            )
            for a in q.aggregates
        ]
        table = f"pd.DataFrame({{{', '.join(parts)}}}).reset_index()"
    else:
        # A one-column frame's reduction keeps the column's dtype, also over no rows.
        parts = [
            f"{py_literal(a.output)}: "
            + (
                f"[len({source})]"
                if a.column is None
                else _aggregate(source, a, one_column_frame=True, as_numbers=a.output in as_numbers)
                + ".reset_index(drop=True)"
            )
            for a in q.aggregates
        ]
        table = f"pd.DataFrame({{{', '.join(parts)}}})"
    chain = [table]
    if q.order:
        chain.append(_sort([c for c, _ in q.order], [not d for _, d in q.order], always_list=True))
    chain.append(_page(q.offset, q.limit))
    chain.append(".reset_index(drop=True)")
    lines.append(_assign(ctx.result, chain))
    return "\n".join(lines)


def append_code(tables: AllowedFrames, args: dict[str, Any], ctx: CodeContext) -> str:
    """The rows as the tool appended them: every column of the frame, each value converted
    as the tool converted it, the next index labels, the frame's dtypes."""
    q = parse_insert(args, tables.specs)
    frame = _frame(tables, q.table, ctx)
    df = tables.frames.get(q.table)
    if df is None:
        columns: list[Any] = list(dict.fromkeys(c for r in q.rows for c in r))
    else:
        columns = list(df.columns)
        allowed = set(tables.columns(q.table))
    values = {
        column: "["
        + ", ".join(
            "None"
            if row.get(column) is None or (df is not None and column not in allowed)
            else _written(_column(df, column), row[column])
            for row in q.rows
        )
        + "]"
        for column in columns
    }
    rows, first = ctx.name("new_rows"), ctx.name("first")
    body = "".join(f"        {py_literal(c)}: {v},\n" for c, v in values.items())
    return (
        f"{first} = {frame}.index.max() + 1 if len({frame}) else 0  # the next index labels\n"
        f"{rows} = pd.DataFrame(\n    {{\n{body}    }},\n"
        f"    index=pd.RangeIndex({first}, {first} + {len(q.rows)}, name={frame}.index.name),\n"
        ")\n"
        f"{frame} = pd.concat([{frame}, {rows}.astype({frame}.dtypes)])"
    )


def _written(col: pd.Series | None, value: Any) -> str:
    """``value`` as the tool wrote it into ``col``."""
    if col is None:
        return py_literal(value)
    try:
        converted = value_to_write(col, value)
    except BadValue:
        return py_literal(value)
    return literal(converted)


def update_code(tables: AllowedFrames, args: dict[str, Any], ctx: CodeContext) -> str:
    q = parse_update(args, tables.specs)
    frame = _frame(tables, q.table, ctx)
    df = tables.frames.get(q.table)
    # The rows are matched once, before any value is written, as the tool matches them (a
    # value may change a column the filter reads).
    lines, mask = _mask(frame, df, q.filters, ctx, named=len(q.values) > 1, own_frame=True)
    for column, value in q.values.items():
        col = _column(df, column, ctx)
        literal = "None" if value is None else _value(col, value, ctx)
        lines.append(f"{frame}.loc[{mask}, {py_literal(column)}] = {literal}")
    return "\n".join(lines)


# ---- pieces ---------------------------------------------------------------------------------


def _frame(tables: AllowedFrames, table: str, ctx: CodeContext) -> str:
    ctx.setup("import pandas as pd")
    return ctx.expect(variable_for(table), f"the DataFrame the agent read as table {table!r}")


def _join(
    tables: AllowedFrames,
    table: str,
    joins: Sequence[Relationship],
    names: Sequence[str],
    filters: Sequence[Filter],
    frame: str,
    df: pd.DataFrame | None,
    ctx: CodeContext,
) -> tuple[list[str], str, pd.DataFrame | None]:
    """The ``merge`` of each join (``loom_nb.frames._joins``): the lines, the variable of the
    joined frame, and the joined frame as it is now (for the filters' values)."""
    if not joins:
        return [], frame, df
    inner = inner_tables(filters)
    used = joined_columns(joins, names)
    name = ctx.name("joined")
    lines = []
    source = frame
    for r in joins:
        other = _frame(tables, r.other, ctx)
        key = f"{r.other}.{r.other_column}"
        lines.append(
            f"{name} = {source}.merge(\n"
            f"    {other}[{py_literal(used[r.other])}]"
            f".add_prefix({py_literal(r.other + '.')}).dropna(subset=[{py_literal(key)}]),\n"
            f'    how="left",\n'
            f"    left_on={py_literal(r.column)},\n"
            f"    right_on={py_literal(key)},\n"
            f'    validate="many_to_one",\n'
            f").set_axis({source}.index)"
        )
        if r.other in inner:  # a filter names its columns: an inner join, as !inner
            lines.append(f"{name} = {name}[{name}[{py_literal(key)}].notna()]")
        source = name
    if df is not None and all(r.other in tables.frames for r in joins):
        df = join(df, joins, tables.frames, used, inner)[0]
    else:
        df = None
    return lines, name, df


def _usable(tables: AllowedFrames, table: str, saved: list[str] | None) -> list[str] | None:
    """The columns a select of every column gave: those of its saved result when there is
    one (``saved``: the frame may have gained columns since), else those the frame allows now."""
    if saved is not None:
        return saved
    return tables.columns(table) if table in tables.frames else None


def _column(
    df: pd.DataFrame | None, column: str, ctx: CodeContext | None = None
) -> pd.Series | None:
    """``df[column]`` (None without one); with ``ctx``, a table's own frame (never a join's,
    made for one call), whose columns an export's calls share (``shared``)."""
    memo = shared(ctx) if ctx is not None and df is not None else None
    key = ("frames._code column", id(df), column)
    if memo is not None:
        found = memo.get(key)
        if found is not None and found[0] is df:  # df is kept alive with it: its id is its own
            return found[1]
    col = None if df is None or column not in df.columns else df[column]
    col = col if isinstance(col, pd.Series) else None
    if memo is not None:
        memo[key] = (df, col)
    return col


def _mask(
    frame: str,
    df: pd.DataFrame | None,
    filters: Sequence[Filter],
    ctx: CodeContext,
    *,
    named: bool = False,
    own_frame: bool = False,
) -> tuple[list[str], str | None]:
    """The boolean Series of the matching rows (None without filters), after the lines it
    needs: a long filter (or any, ``named``) gets a variable of its own, one filter a line.
    ``own_frame``: ``df`` is the table's frame, not a join's."""
    if not filters:
        return [], None
    of = ctx if own_frame else None
    terms = [_term(frame, _column(df, f.column, of), f, ctx) for f in filters]
    mask = " & ".join(terms)
    if len(mask) <= 60 and not named:
        return [], mask
    name = ctx.name("mask")
    if len(mask) > 90:
        mask = "(\n    " + "\n    & ".join(terms) + "\n)"
    return [f"{name} = {mask}"], name


def _term(frame: str, col: pd.Series | None, f: Filter, ctx: CodeContext) -> str:
    """One filter as ``&``-joined atoms (so terms join with `` & `` as they are), with SQL's
    rule for missing values: they match only ``is_null``, negated or not."""
    c = f"{frame}[{py_literal(f.column)}]"
    if f.op == "is_null":
        return f"{c}.notna()" if f.negate else f"{c}.isna()"
    if f.op in ("like", "ilike"):
        hit = _like(c, f.value, f.op == "ilike", ctx)
    elif f.op == "in":
        hit = f"{c}.isin([{', '.join(_value(col, v, ctx) for v in f.value)}])"
    else:
        hit = f"({c} {_COMPARE[f.op]} {_value(col, f.value, ctx)})"
        if _masked(col, f):
            hit = f"{hit}.fillna(False)"  # nullable dtypes compare missing values as NA
    may_miss = col is None or holds_missing(col.dtype)
    if f.negate:
        return f"~{hit} & {c}.notna()" if may_miss else f"~{hit}"
    # Comparisons, ``isin`` and the string methods are already false for NaN, NaT and None;
    # "not equal" is true for them.
    if f.op == "neq" and may_miss:
        return f"{hit} & {c}.notna()"
    return hit


#: Dtypes whose comparisons give numpy's bool (or raise), whatever the value: no need to
#: compare an empty slice to know (that took most of the time of writing a thread's code).
_UNMASKED = (np.dtype, pd.CategoricalDtype, pd.DatetimeTZDtype, pd.PeriodDtype)


def _masked(col: pd.Series | None, f: Filter) -> bool:
    """Does comparing ``col`` give pandas' NA for missing values (nullable dtypes)?"""
    if col is None or isinstance(col.dtype, _UNMASKED):
        return False
    try:
        value = value_for(col, f.value)
        compared = col.iloc[:0] == value
    except (BadValue, TypeError, ValueError):
        return False
    return isinstance(compared.dtype, pd.BooleanDtype)


def _value(col: pd.Series | None, value: Any, ctx: CodeContext) -> str:
    """``value`` as the filter compared it: converted to the column's dtype."""
    if col is None:
        return py_literal(value)
    try:
        converted = value_for(col, value)
    except BadValue:
        return py_literal(value)
    return literal(converted)


def literal(converted: Any) -> str:
    """A converted value as Python source (a timestamp as ``pd.Timestamp(...)``)."""
    if isinstance(converted, pd.Timestamp):
        return f"pd.Timestamp({py_literal(converted.isoformat())})"
    if isinstance(converted, pd.Timedelta):
        return f"pd.Timedelta({py_literal(str(converted))})"
    return py_literal(converted)


def _like(c: str, pattern: str, ignore_case: bool, ctx: CodeContext) -> str:
    """SQL LIKE as pandas: plain string methods for a prefix, a suffix or a part, else the
    regular expression the filter used."""
    if not ignore_case and "_" not in pattern and "\\" not in pattern:
        inner = pattern.strip("%")
        if "%" not in inner:
            starts, ends = pattern.startswith("%"), pattern.endswith("%")
            text = py_literal(inner)
            if not starts and not ends:
                return f"({c} == {text})"
            if inner and not starts:
                return f"{c}.str.startswith({text}, na=False)"
            if inner and not ends:
                return f"{c}.str.endswith({text}, na=False)"
            if inner and pattern == f"%{inner}%":
                return f"{c}.str.contains({text}, regex=False, na=False)"
    ctx.setup("import re")
    flags = "re.DOTALL | re.IGNORECASE" if ignore_case else "re.DOTALL"
    return f"{c}.str.fullmatch({_regex_literal(like_regex(pattern))}, flags={flags}, na=False)"


def _regex_literal(regex: str) -> str:
    # A raw string only of what is printable (a raw U+2028 would end the line)
    if '"' in regex or regex.endswith("\\") or not regex.isprintable():
        return py_literal(regex)
    return f'r"{regex}"'


#: The pandas of each aggregate: a sum of no values is missing, as in SQL (pandas would say 0);
#: count_distinct is SQL's count(DISTINCT column).
_AGGREGATE_CALLS = {"sum": "sum(min_count=1)", "count_distinct": "nunique()"}


def _aggregate(
    source: str, a: Aggregate, *, one_column_frame: bool = False, as_numbers: bool = False
) -> str:
    """``source["total"].fn()``, or ``source[["total"]].fn()`` (``as_numbers``: of the
    column as floats)."""
    assert a.column is not None
    key = f"[{py_literal(a.column)}]" if one_column_frame else py_literal(a.column)
    if a.fn == "percentile":
        floats = '.astype("float64")' if as_numbers else ""
        return f"{source}[{key}]{floats}.quantile({a.p!r})"
    return f"{source}[{key}].{_AGGREGATE_CALLS.get(a.fn, f'{a.fn}()')}"


def _bins(source: str, k: GroupKey, ctx: CodeContext, lines: list[str]) -> str:
    """The bins of ``k`` as ``frames_aggregate`` makes them (``bin_starts``): the edges, then
    each value's bin by its left edge, ``[left, right)`` and the last ``[left, right]``."""
    ctx.setup("import numpy as np")
    column = f"{source}[{py_literal(k.column)}]"
    edges, name = ctx.name(f"edges_{k.column}"), ctx.name(k.output)
    if isinstance(k.bins, tuple):
        lines.append(f"{edges} = np.array({py_literal(list(k.bins))})")
    else:
        lines.append(f"{edges} = np.histogram_bin_edges({column}.dropna(), bins={k.bins})")
    lines.append(
        f"{name} = pd.cut({column}, [*{edges}[:-1], np.nextafter({edges}[-1], np.inf)], "
        f'right=False, labels={edges}[:-1]).astype("float64").rename({py_literal(k.output)})'
    )
    return name


def _sort(keys: list[str], ascending: list[bool], *, always_list: bool = False) -> str:
    if len(keys) == 1 and not always_list:
        return f".sort_values({py_literal(keys[0])}, ascending={ascending[0]}, {_SORT})"
    return f".sort_values({py_literal(keys)}, ascending={ascending}, {_SORT})"


def _page(offset: int, limit: int) -> str:
    return f".head({limit})" if not offset else f".iloc[{offset}:{offset + limit}]"


def _assign(name: str, chain: list[str]) -> str:
    one_line = f"{name} = {''.join(chain)}"
    if len(one_line) <= 88:
        return one_line
    return f"{name} = (\n    " + "\n    ".join(chain) + "\n)"
