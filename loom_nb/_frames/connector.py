"""The tools of ``frame_tools``: names, descriptions for the model, input schemas."""

from __future__ import annotations

from typing import Any

from loom_nb._frames import reads
from loom_nb._frames.aggregate import aggregate_schema
from loom_nb._frames.tables import Tables
from loom_nb._frames.writes import Writes
from loom_nb._query import insert_schema, select_schema, update_schema
from loom_nb._tools import Connector, Tool, connector, tool


def frame_connector(tables: Tables, approve_writes: bool) -> Connector:
    """list_tables, select and aggregate; append and update when some frame is writable."""
    n, specs, max_rows = tables.name, tables.specs, tables.max_rows
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
            run=lambda _args: reads.list_tables(tables),
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
            run=lambda args: reads.select(tables, args),
        ),
        f"{n}_aggregate": tool(
            name=f"{n}_aggregate",
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
            input=aggregate_schema(specs, max_rows),
            run=lambda args: reads.aggregate(tables, args),
        ),
    }
    if any(s.write for s in specs.values()):
        writes = Writes(tables, approve_writes)
        gate = " The user approves each call before anything is written." if approve_writes else ""
        tools[f"{n}_append"] = tool(
            name=f"{n}_append",
            description=(
                "Append rows to a writable table: rows is a list of {column: value}; "
                "omitted columns are left empty where the column allows it." + gate
            ),
            input=insert_schema(specs),
            run=writes.append,
            needs_approval=writes.needs_approval(writes.plan_append),
            preview=writes.preview_append,
        )
        tools[f"{n}_update"] = tool(
            name=f"{n}_update",
            description=(
                "Set values on the rows of a writable table that match all filters (same "
                f"filters as {n}_select; at least one is required)." + gate
            ),
            input=update_schema(specs),
            run=writes.update,
            needs_approval=writes.needs_approval(writes.plan_update),
            preview=writes.preview_update,
        )
    return connector(n, tools)
