"""The DataFrame backend of the table tools: the operations of ``frame_tools``, and what its
tools add to the shared descriptions."""

from __future__ import annotations

from loom_nb._tables.builder import Read, Write, table_connector
from loom_nb._tools import Connector, tool
from loom_nb.frames import _reads as reads
from loom_nb.frames._aggregate import aggregate_schema
from loom_nb.frames._allowlist import Tables
from loom_nb.frames._writes import Writes


def frame_connector(tables: Tables, approve_writes: bool) -> Connector:
    """list_tables, select and aggregate; append and update when some frame is writable."""
    n, max_rows = tables.name, tables.max_rows
    writes = Writes(tables, approve_writes)
    aggregate = tool(
        description=(
            "Summarize one table: group_by columns, or time buckets of a datetime column "
            "like {column: 'created_at', bucket: 'week'} (day, week from Monday, month, "
            "quarter, year; output column week_created_at holds each bucket's start), "
            "and aggregates [{fn, column}] with fn count, count_distinct, sum, mean, "
            "median, min or max (count without a column counts rows). Output columns are "
            "named fn_column (count for the row count); order may use them, e.g. "
            f"[{{column: 'sum_total', desc: true}}]. Filters as in {n}_select. Missing "
            "values and missing timestamps form their own group, last. At most "
            f"{max_rows} groups per call; the total number of groups is reported."
        ),
        input=aggregate_schema(tables.specs, max_rows),
        run=lambda args: reads.aggregate(tables, args),
    )
    return table_connector(
        n,
        tables.specs,
        max_rows=max_rows,
        approve_writes=approve_writes,
        list_tables=Read(
            lambda _args: reads.list_tables(tables),
            notes=" The tables are pandas DataFrames: each also gives its row count, and each "
            "column its dtype (and the values of a categorical column). Call this first.",
        ),
        select=Read(
            lambda args: reads.select(tables, args),
            notes=" Missing values match only is_null. Give timestamps as ISO 8601 strings. "
            "order sorts (missing values last).",
        ),
        more_reads={"aggregate": aggregate},
        insert_as="append",
        insert=Write(
            writes.append,
            check=writes.check_append,
            preview=writes.preview_append,
            notes=" Omitted columns are left empty where the column allows it.",
        ),
        update=Write(writes.update, check=writes.check_update, preview=writes.preview_update),
    )
