"""The DataFrame backend of the table tools: the operations of ``frame_tools``, and what its
tools add to the shared descriptions."""

from __future__ import annotations

from typing import Any

from loom_nb._code import CodeContext
from loom_nb._tables.builder import Read, Write, rows_rule, table_connector, words_tables
from loom_nb._tables.filter_text import aggregate_words
from loom_nb._tables.grammar import parse_aggregate
from loom_nb._tables.schemas import aggregate_schema
from loom_nb._tools import Connector, tool
from loom_nb.frames import _code as code
from loom_nb.frames import _duck_code as duck_code
from loom_nb.frames import _duck_reads as duck_reads
from loom_nb.frames import _reads as reads
from loom_nb.frames._aggregate import FRAME_AGGREGATES
from loom_nb.frames._allowlist import AllowedFrames
from loom_nb.frames._namespace import NAMESPACE_FRAMES
from loom_nb.frames._writes import Writes


def frame_connector(tables: AllowedFrames, approve_writes: bool) -> Connector:
    """list_tables, select and aggregate; append and update when some frame is writable."""
    n, max_rows, frame_rows = tables.name, tables.max_rows, tables.frame_rows
    writes = Writes(tables, approve_writes)
    # With namespace=..., each run sees the namespace's DataFrames as it finds them; the code
    # of a call reads them as they are now (for_run(None)).
    open_tables = ""
    if tables.namespace is not None:
        open_tables = (
            f"- and up to {NAMESPACE_FRAMES} DataFrames of the user's notebook, by variable name, "
            f"read-only: {n}_list_tables lists them"
        )

    def aggregate_described(args: dict[str, Any]) -> str:
        known = words_tables(tables.specs, args) if open_tables else tables.specs
        return aggregate_words(
            parse_aggregate(args, known, frame_rows, FRAME_AGGREGATES, tables.relationships)
        )

    aggregate = tool(
        description=(
            "Summarize one table: group_by columns, or time buckets of a datetime column "
            "like {column: 'created_at', bucket: 'week'} (day, week from Monday, month, "
            "quarter, year; output column week_created_at holds each bucket's start), or "
            "bins of a numeric column like {column: 'total', bins: 20} (or the edges; "
            "output bin_total holds each bin's left edge), and aggregates [{fn, column}] "
            "with fn count, count_distinct, sum, mean, median, min, max, std, var (the "
            "sample's) or percentile with p from 0 to 1 (p90_total for p 0.9; several per "
            "call) (count without a column counts rows). Every matching row counts, not "
            "only the rows you see. Output columns are named fn_column (count for the row "
            "count); order may use them, e.g. "
            f"[{{column: 'sum_total', desc: true}}]. Filters and join as in {n}_select. "
            "Missing values and missing timestamps form their own group, last. "
            f"{rows_rule(max_rows, frame_rows, 'groups')} The number of groups is reported."
        ),
        input=aggregate_schema(
            tables.specs,
            max_rows,
            FRAME_AGGREGATES,
            open_tables=bool(open_tables),
            frame_rows=frame_rows,
            relationships=tables.relationships,
        ),
        run=lambda args, ctx=None: _aggregate(tables.for_run(ctx), args),
        describe=aggregate_described,
        code=lambda args, ctx: _aggregate_code(tables.for_run(None), args, ctx),
    )
    return table_connector(
        n,
        tables.specs,
        max_rows=max_rows,
        frame_rows=frame_rows,
        approve_writes=approve_writes,
        open_tables=open_tables,
        relationships=tables.relationships,
        list_tables=Read(
            lambda _args, ctx=None: reads.list_tables(tables.for_run(ctx)),
            notes=" The tables are pandas DataFrames"
            + (" and DuckDB tables (files)" if tables.duck else "")
            + ": each also gives its row count, and each column its dtype (and the values "
            "of a categorical column). Call this first.",
        ),
        select=Read(
            lambda args, ctx=None: _select(tables.for_run(ctx), args),
            notes=" Missing values match only is_null. Give timestamps as ISO 8601 strings. "
            "order sorts (missing values last).",
            code=lambda args, ctx: _select_code(tables.for_run(None), args, ctx),
        ),
        more_reads={"aggregate": aggregate},
        insert_as="append",
        insert=Write(
            writes.append,
            check=writes.check_append,
            preview=writes.preview_append,
            notes=" Omitted columns are left empty where the column allows it.",
            code=lambda args, ctx: code.append_code(tables, args, ctx),
        ),
        update=Write(
            writes.update,
            check=writes.check_update,
            preview=writes.preview_update,
            code=lambda args, ctx: code.update_code(tables, args, ctx),
        ),
    )


def _select(tables: AllowedFrames, args: dict[str, Any]) -> Any:
    """A select, by DuckDB when it reads a DuckDB table, else by pandas."""
    if duck_reads.uses_duckdb(tables, args):
        return duck_reads.select(tables, args)
    return reads.select(tables, args)


def _aggregate(tables: AllowedFrames, args: dict[str, Any]) -> Any:
    if duck_reads.uses_duckdb(tables, args):
        return duck_reads.aggregate(tables, args)
    return reads.aggregate(tables, args)


def _select_code(tables: AllowedFrames, args: dict[str, Any], ctx: CodeContext) -> str:
    """A select's code: the DuckDB statement the tool ran, or the pandas."""
    if duck_reads.uses_duckdb(tables, args):
        return duck_code.select_code(tables, args, ctx)
    return code.select_code(tables, args, ctx)


def _aggregate_code(tables: AllowedFrames, args: dict[str, Any], ctx: CodeContext) -> str:
    if duck_reads.uses_duckdb(tables, args):
        return duck_code.aggregate_code(tables, args, ctx)
    return code.aggregate_code(tables, args, ctx)
