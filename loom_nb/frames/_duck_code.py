"""The code of a frames call that DuckDB ran: the very statement the tool ran (``_sql``), on
DuckDB's default connection, its parameters as Python literals, so the export reruns it.

A Parquet or CSV table is read again from its path (``trips = duckdb.read_parquet(...)``, in
the export's first cell); a relation, and a DataFrame the call joins, are variables the
notebook defines, which DuckDB finds by name (its replacement scans). The statement's text
holds only quoted identifiers the allowlist passed and ``$p1``-style placeholders: the
model's values are in the parameters, written by ``py_literal``.
"""

from __future__ import annotations

from typing import Any

from loom_nb._code import CodeContext, py_literal, saved_columns, variable_for
from loom_nb._tables.grammar import parse_aggregate, parse_select
from loom_nb.frames import _sql as sql
from loom_nb.frames._aggregate import FRAME_AGGREGATES
from loom_nb.frames._allowlist import AllowedFrames
from loom_nb.frames._code import literal
from loom_nb.frames._duck_reads import nan_free
from loom_nb.frames._reads import _every_column


class _Named:
    """A parameter whose value the code computes first (a bins group's edges)."""

    def __init__(self, name: str) -> None:
        self.name = name


def _source(tables: AllowedFrames, ctx: CodeContext) -> sql.Source:
    ctx.setup("import duckdb")
    ctx.setup("import pandas as pd")  # the parameters' timestamps, and the results

    def ref(table: str) -> str:
        variable = variable_for(table)
        duck = tables.duck.get(table)
        if duck is None:
            ctx.expect(variable, f"the DataFrame the agent read as table {table!r}")
        elif duck.kind == "relation":
            ctx.expect(variable, f"the DuckDB relation the agent read as table {table!r}")
        else:
            reader = "read_parquet" if duck.kind == "parquet" else "read_csv"
            ctx.setup(f"{variable} = duckdb.{reader}({py_literal(duck.path)})")
        return sql.quote(variable)

    # Not the statistics of the table now: the code keeps the NaN rules for the rows it finds.
    return sql.Source(ref, tables.frames, tables.columns, lambda t, _c: nan_free(tables, t))


def _execute(statement: sql.Statement, fetch: str) -> str:
    """``duckdb.execute(text, params).df()``, the text one clause a line."""
    text = statement.sql
    for word in (" FROM ", " LEFT JOIN ", " JOIN ", " WHERE ", " GROUP BY ", " ORDER BY "):
        text = text.replace(word, "\n" + word[1:])
    lines = text.split("\n")
    pieces = "\n".join(
        f"        {py_literal(line + (' ' if i < len(lines) - 1 else ''))}"
        for i, line in enumerate(lines)
    )
    params = ", ".join(f"{py_literal(k)}: {_value(v)}" for k, v in statement.params.items())
    return f"duckdb.execute(\n    (\n{pieces}\n    ),\n    {{{params}}},\n).{fetch}"


def _value(value: Any) -> str:
    return value.name if isinstance(value, _Named) else literal(value)


def select_code(tables: AllowedFrames, args: dict[str, Any], ctx: CodeContext) -> str:
    q = parse_select(args, tables.specs, tables.frame_rows, tables.relationships)
    columns = list(q.columns) if q.columns is not None else _saved_columns(tables, q, ctx)
    page, _ = sql.select_statements(_source(tables, ctx), q, columns)
    fetch = f"df().set_index({py_literal(sql.ROW)}).rename_axis(None)"
    return f"{ctx.result} = {_execute(page, fetch)}"


def _saved_columns(tables: AllowedFrames, q: Any, ctx: CodeContext) -> list[str]:
    """A select of every column: those of its saved result when there is one."""
    saved = saved_columns(ctx)  # a stored frame's, not decoded
    if saved is not None:
        return saved
    data = ctx.data
    if data is not None and hasattr(data, "columns"):
        return [str(c) for c in data.columns]
    return _every_column(tables, q)


def aggregate_code(tables: AllowedFrames, args: dict[str, Any], ctx: CodeContext) -> str:
    q = parse_aggregate(
        args, tables.specs, tables.frame_rows, FRAME_AGGREGATES, tables.relationships
    )
    source = _source(tables, ctx)
    lines = []
    edges: dict[str, Any] = {}
    for k in q.group_by:
        if k.bins is None:
            continue
        if isinstance(k.bins, tuple):
            edges[k.output] = [float(e) for e in k.bins]
            continue
        ctx.setup("import numpy as np")
        low, high, name = ctx.name("low"), ctx.name("high"), ctx.name(f"edges_{k.column}")
        lines.append(f"{low}, {high} = {_execute(sql.range_statement(source, q, k), 'fetchone()')}")
        lines.append(
            f"{name} = np.histogram_bin_edges(\n"
            f'    np.array([v for v in ({low}, {high}) if v is not None], dtype="float64"),\n'
            f"    bins={k.bins},\n).tolist()"
        )
        edges[k.output] = _Named(name)
    statement, _ = sql.aggregate_statement(source, q, edges)
    fetch = "df()"
    if not q.group_by and (q.offset or q.limit < 1):
        fetch += f".iloc[{q.offset} : {q.offset + q.limit}].reset_index(drop=True)"
    lines.append(f"{ctx.result} = {_execute(statement, fetch)}")
    return "\n".join(lines)
