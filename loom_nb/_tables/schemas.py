"""The JSON schemas of the table tools: what the model is told it may send, with the
allowlist's tables and columns as enums where the user listed them. ``open_tables``: more
tables are known only when a call runs (a namespace's DataFrames), so any plain name goes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from loom_nb._tables.grammar import OPERATORS, AggregateRules
from loom_nb._tables.options import IDENTIFIER, TableSpec


def _column_schema(tables: Mapping[str, TableSpec], open_tables: bool = False) -> dict[str, Any]:
    if not open_tables and all(s.columns is not None for s in tables.values()):
        names = sorted({c for s in tables.values() for c in s.columns or ()})
        return {"type": "string", "enum": names}
    return {"type": "string", "pattern": IDENTIFIER.pattern}


def filters_schema(tables: Mapping[str, TableSpec], open_tables: bool = False) -> dict[str, Any]:
    return {
        "type": "array",
        "description": "All filters must match (AND).",
        "items": {
            "type": "object",
            "properties": {
                "column": _column_schema(tables, open_tables),
                "op": {
                    "type": "string",
                    "enum": list(OPERATORS),
                    "description": "like/ilike use % and _ wildcards; is_null takes no value.",
                },
                "value": {
                    "description": "A string, number or boolean; a list for 'in'.",
                    "anyOf": [
                        {"type": ["string", "number", "boolean"]},
                        {"type": "array", "items": {"type": ["string", "number", "boolean"]}},
                    ],
                },
                "not": {"type": "boolean", "description": "Negate this filter."},
            },
            "required": ["column", "op"],
            "additionalProperties": False,
        },
    }


def group_by_schema(
    tables: Mapping[str, TableSpec], buckets: Sequence[str], open_tables: bool = False
) -> dict[str, Any]:
    column = _column_schema(tables, open_tables)
    if not buckets:
        return {
            "type": "array",
            "items": column,
            "description": "Columns to group by; omit for one row of totals.",
        }
    return {
        "type": "array",
        "items": {
            "anyOf": [
                column,
                {
                    "type": "object",
                    "properties": {
                        "column": {**column, "description": "A datetime column."},
                        "bucket": {"type": "string", "enum": list(buckets)},
                    },
                    "required": ["column", "bucket"],
                    "additionalProperties": False,
                },
            ]
        },
        "description": (
            "Columns to group by, or {column, bucket} to group a datetime column by day, week "
            "(weeks start on Monday), month, quarter or year, in the column's time zone. A "
            "bucket's output column is named bucket_column (like week_created_at) and holds "
            "each bucket's start. Omit group_by for one summary row over all matches."
        ),
    }


def aggregate_schema(
    tables: Mapping[str, TableSpec],
    max_rows: int,
    rules: AggregateRules,
    open_tables: bool = False,
) -> dict[str, Any]:
    base = select_schema(tables, max_rows, open_tables)["properties"]
    column = base["columns"]["items"]
    # Order names a result's column: any output, or (where totals cannot be ordered by) a
    # group_by column of the allowlist.
    order_column = column
    if rules.order_by_totals:
        order_column = {
            "type": "string",
            "pattern": IDENTIFIER.pattern,
            "description": (
                "A group_by output (like status or week_created_at) or an "
                "aggregate's output name like sum_total."
            ),
        }
    order: dict[str, Any] = {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {"column": order_column, "desc": {"type": "boolean"}},
            "required": ["column"],
            "additionalProperties": False,
        },
    }
    if not rules.order_by_totals:
        order["description"] = "Order by group_by columns (totals cannot be ordered by)."
    return {
        "type": "object",
        "properties": {
            "table": base["table"],
            "group_by": group_by_schema(tables, rules.buckets, open_tables),
            "aggregates": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "fn": {"type": "string", "enum": list(rules.functions)},
                        "column": {**column, "description": "Omit with fn=count to count rows."},
                    },
                    "required": ["fn"],
                    "additionalProperties": False,
                },
                "description": "Output columns are named fn_column, or count for a row count. "
                "Default: [{fn: count}].",
            },
            "filters": base["filters"],
            "order": order,
            "limit": {
                "type": "integer",
                "minimum": 0,
                "description": (
                    f"At most {max_rows} groups come back; a larger limit is cut to that."
                ),
            },
            "offset": base["offset"],
        },
        "required": ["table"],
        "additionalProperties": False,
    }


def select_schema(
    tables: Mapping[str, TableSpec], max_rows: int, open_tables: bool = False
) -> dict[str, Any]:
    column = _column_schema(tables, open_tables)
    return {
        "type": "object",
        "properties": {
            "table": table_schema(tables, open_tables),
            "columns": {
                "type": "array",
                "items": column,
                "description": "Columns to return; omit for all allowed columns.",
            },
            "filters": filters_schema(tables, open_tables),
            "order": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"column": column, "desc": {"type": "boolean"}},
                    "required": ["column"],
                    "additionalProperties": False,
                },
            },
            "limit": {
                "type": "integer",
                "minimum": 0,
                "description": f"At most {max_rows} rows come back; a larger limit is cut to that.",
            },
            "offset": {"type": "integer", "minimum": 0},
            "count": {
                "type": "boolean",
                "description": "Also return the exact number of matching rows.",
            },
        },
        "required": ["table"],
        "additionalProperties": False,
    }


def table_schema(tables: Mapping[str, TableSpec], open_tables: bool = False) -> dict[str, Any]:
    if open_tables:
        return {
            "type": "string",
            "pattern": IDENTIFIER.pattern,
            "description": "A table the list-tables tool lists.",
        }
    return {"type": "string", "enum": sorted(tables)}


def insert_schema(tables: Mapping[str, TableSpec]) -> dict[str, Any]:
    writable = {n: s for n, s in tables.items() if s.write}
    return {
        "type": "object",
        "properties": {
            "table": {"type": "string", "enum": sorted(writable)},
            "rows": {"type": "array", "minItems": 1, "items": _values_schema(writable)},
        },
        "required": ["table", "rows"],
        "additionalProperties": False,
    }


def update_schema(tables: Mapping[str, TableSpec]) -> dict[str, Any]:
    writable = {n: s for n, s in tables.items() if s.write}
    return {
        "type": "object",
        "properties": {
            "table": {"type": "string", "enum": sorted(writable)},
            "values": _values_schema(writable),
            "filters": {**filters_schema(writable), "minItems": 1},
        },
        "required": ["table", "values", "filters"],
        "additionalProperties": False,
    }


def _values_schema(tables: Mapping[str, TableSpec]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "minProperties": 1}
    if tables and all(s.columns is not None for s in tables.values()):
        names = sorted({c for s in tables.values() for c in s.columns or ()})
        schema["propertyNames"] = {"enum": names}
    else:
        schema["propertyNames"] = {"pattern": IDENTIFIER.pattern}
    return schema
