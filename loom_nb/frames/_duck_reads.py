"""The read tools over DuckDB tables: a call on a DuckDB table, or one that joins one, runs as
the statements of ``_sql`` on that table's connection (the DataFrames it joins registered for
the call), and answers as the pandas backend does: the same counts, words and boundary, the
results pandas DataFrames."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from loom_nb._counts import counts, with_counts
from loom_nb._tables.grammar import AggregateQuery, parse_aggregate, parse_select
from loom_nb._tools import ToolInputError, ToolOutput
from loom_nb.frames import _sql as sql
from loom_nb.frames._aggregate import FRAME_AGGREGATES
from loom_nb.frames._allowlist import AllowedFrames
from loom_nb.frames._duckdb import (
    DuckTable,
    fetch,
    fetch_one,
    frame_nan_free,
    frame_views,
    nan_free_columns,
)
from loom_nb.frames._joins import inner_tables, unmatched_text
from loom_nb.frames._reads import _every_column, _page_text, aggregate_output
from loom_nb.frames._values import dtype_kind


def uses_duckdb(tables: AllowedFrames, args: dict[str, Any]) -> bool:
    """Does the call read a DuckDB table (as its table, or one it joins)?"""
    join = args.get("join")
    named = [args.get("table"), *(join if isinstance(join, list) else [])]
    return any(isinstance(t, str) and t in tables.duck for t in named)


def source(
    tables: AllowedFrames, names: dict[str, str], table: str = "", columns: Sequence[str] = ()
) -> sql.Source:
    """The tables as the tool's statements name them: each DuckDB table by its view, each
    joined DataFrame by the name it is registered under for the call. Of ``columns``, those
    the call on ``table`` names (``customers.tier`` for a joined one), a float column of a
    large table DuckDB stores is read as stored when its statistics show no NaN now
    (``nan_free_columns``): ``nullif`` on every row is 5-10 % of a statement over all of them."""
    floats: dict[str, list[str]] = {}
    for name in columns:
        other, _, column = name.rpartition(".")
        owner = other or table
        duck = tables.duck.get(owner)
        dtypes = duck.sample.dtypes if duck is not None and duck.asks_statistics else {}
        if column in dtypes and dtype_kind(dtypes[column]) == "float":
            floats.setdefault(owner, []).append(column)
    free = {t: nan_free_columns(tables.duck[t], cs) for t, cs in floats.items()}

    def ref(table: str) -> str:
        duck = tables.duck.get(table)
        return sql.quote(duck.view if duck is not None else names[table])

    def read_as_stored(table: str, column: str) -> bool:
        return column in free.get(table, ()) or nan_free(tables, table)

    return sql.Source(ref, tables.frames, tables.columns, read_as_stored)


def nan_free(tables: AllowedFrames, table: str) -> bool:
    """Does DuckDB read no NaN in ``table``'s float columns, whatever rows it holds: a relation
    that scans a DataFrame, or a DataFrame the call joins (registered, or found by name in the
    export)?"""
    duck = tables.duck.get(table)
    return duck.nan_free if duck is not None else frame_nan_free(tables.frames[table])


def _frames(tables: AllowedFrames) -> dict[str, pd.DataFrame]:
    """The DataFrames among the tables (a DuckDB table's frame is its zero-row sample)."""
    return {t: df for t, df in tables.frames.items() if t not in tables.duck}


def _driver(tables: AllowedFrames, table: str, others: list[str]) -> DuckTable:
    """The DuckDB table whose connection runs the call."""
    return next(tables.duck[t] for t in [table, *others] if t in tables.duck)


def select(tables: AllowedFrames, args: dict[str, Any]) -> ToolOutput:
    q = parse_select(args, tables.specs, tables.frame_rows, tables.relationships)
    others = [r.other for r in q.joins]
    with tables.locked([q.table, *others]):
        columns = list(q.columns) if q.columns is not None else _every_column(tables, q)
        names = [*columns, *(f.column for f in q.filters), *(c for c, _ in q.order)]
        tables.check_columns(q.table, names)
        views = frame_views([q.table, *others], _frames(tables))
        registered = {views[t]: tables.frames[t] for t in views}
        src = source(tables, views, q.table, names)
        driver = _driver(tables, q.table, others)
        joined = _join_text(tables, src, driver, q.table, q.joins, q.filters, registered)
        page, count = sql.select_statements(src, q, columns)
        frame = fetch(driver, page, registered)
        matched = int(fetch_one(driver, count, registered)[0])
    frame = frame.set_index(sql.ROW).rename_axis(None)
    found = counts(
        rows=len(frame),
        matched=matched,
        limit=q.asked,
        offset=q.offset,
        frame_rows=tables.frame_rows,
        max_rows=tables.max_rows,
    )
    text = joined + _page_text(tables, q.table, frame, matched, q.offset, q.count, found)
    return ToolOutput(text, with_counts(frame, found))


def _join_text(
    tables: AllowedFrames,
    src: sql.Source,
    driver: DuckTable,
    table: str,
    joins: Any,
    filters: Any,
    registered: dict[str, pd.DataFrame],
) -> str:
    """Refuse a relationship whose key repeats; what the model is told of rows without a
    match (as the pandas backend tells it)."""
    if not joins:
        return ""
    tables.check_columns(table, [r.column for r in joins])
    unmatched = {}
    for r in joins:
        repeats, missing = sql.join_checks(src, table, r)
        if int(fetch_one(driver, repeats, registered)[0]):
            raise ToolInputError(
                f"{r.other}.{r.other_column} repeats a value, so {r.text} does not give each "
                f"{r.table} row one {r.other} row; tell the user, whose relationship it is"
            )
        unmatched[r.other] = int(fetch_one(driver, missing, registered)[0])
    return unmatched_text(table, unmatched, inner_tables(filters)) + "\n"


def bin_edges(low: Any, high: Any, bins: int | tuple[float, ...]) -> list[float]:
    """The edges of a bins group: the given ones, or ``np.histogram_bin_edges`` over the
    smallest and largest matching value (the same edges as over all of them)."""
    if isinstance(bins, tuple):
        return [float(e) for e in bins]
    present = [float(v) for v in (low, high) if v is not None and not pd.isna(v)]
    return [float(e) for e in np.histogram_bin_edges(np.asarray(present, "float64"), bins=bins)]


def aggregate(tables: AllowedFrames, args: dict[str, Any]) -> ToolOutput:
    q: AggregateQuery = parse_aggregate(
        args, tables.specs, tables.frame_rows, FRAME_AGGREGATES, tables.relationships
    )
    others = [r.other for r in q.joins]
    with tables.locked([q.table, *others]):
        tables.check_columns(q.table, sql.aggregate_names(q))
        views = frame_views([q.table, *others], _frames(tables))
        registered = {views[t]: tables.frames[t] for t in views}
        src = source(tables, views, q.table, sql.aggregate_names(q))
        driver = _driver(tables, q.table, others)
        joined = _join_text(tables, src, driver, q.table, q.joins, q.filters, registered)
        edges: dict[str, list[float]] = {}
        if any(k.bins is not None and not isinstance(k.bins, tuple) for k in q.group_by):
            # Refused as by pandas before the range is asked (the statement checks again).
            sample = sql.plan(src, q.table, q.joins, sql.aggregate_names(q), q.filters).sample
            sql.check_aggregate_query(src, q, sample)
        for k in q.group_by:
            if k.bins is not None:
                low, high = (None, None)
                if not isinstance(k.bins, tuple):
                    low, high = fetch_one(driver, sql.range_statement(src, q, k), registered)
                edges[k.output] = bin_edges(low, high, k.bins)
        statement, _ = sql.aggregate_statement(src, q, edges)
        out = fetch(driver, statement, registered)
        groups = _groups(q, out, driver, src, registered, edges)
    if q.group_by:
        frame = out.reset_index(drop=True)
    else:
        frame = out.iloc[q.offset : q.offset + q.limit].reset_index(drop=True)
    return aggregate_output(tables, q, frame, groups, edges, joined)


def _groups(
    q: AggregateQuery,
    out: pd.DataFrame,
    driver: DuckTable,
    src: sql.Source,
    registered: dict[str, pd.DataFrame],
    edges: dict[str, list[float]],
) -> int:
    """The number of groups: told by a page that ends before its limit, else counted."""
    if not q.group_by:
        return 1
    if len(out) < q.limit and (len(out) or not q.offset):
        return q.offset + len(out)
    return int(fetch_one(driver, sql.groups_statement(src, q, edges), registered)[0])
