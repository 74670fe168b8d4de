"""The JSON schemas of the table tools: what the model is told it may send, with the
allowlist's tables and columns as enums where the user listed them. ``open_tables``: more
tables are known only when a call runs (a namespace's DataFrames), so any plain name goes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from loom_nb._tables.grammar import KNOWN_FUNCTIONS, MAX_BINS, OPERATORS, AggregateRules
from loom_nb._tables.options import IDENTIFIER, Relationship, TableSpec

#: A column, or a joined table's column (``customers.tier``).
_JOINED = r"^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$"


def _column_schema(
    tables: Mapping[str, TableSpec],
    open_tables: bool = False,
    relationships: Sequence[Relationship] = (),
) -> dict[str, Any]:
    if not open_tables and all(s.columns is not None for s in tables.values()):
        names = {c for s in tables.values() for c in s.columns or ()}
        names |= {f"{r.other}.{c}" for r in relationships for c in tables[r.other].columns or ()}
        return {"type": "string", "enum": sorted(names)}
    return {"type": "string", "pattern": _JOINED if relationships else IDENTIFIER.pattern}


def join_schema(relationships: Sequence[Relationship]) -> dict[str, Any]:
    """``join``: the tables related to the call's table by a declared relationship."""
    pairs = "; ".join(f"{r.table} may join {r.other} ({r.text})" for r in relationships)
    return {
        "type": "array",
        "items": {"type": "string", "enum": sorted({r.other for r in relationships})},
        "description": f"Related tables to read beside each row: {pairs}. Their columns are "
        "written table.column (customers.tier) wherever a column goes.",
    }


def filters_schema(
    tables: Mapping[str, TableSpec],
    open_tables: bool = False,
    relationships: Sequence[Relationship] = (),
) -> dict[str, Any]:
    return {
        "type": "array",
        "description": "All filters must match (AND).",
        "items": {
            "type": "object",
            "properties": {
                "column": _column_schema(tables, open_tables, relationships),
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
    tables: Mapping[str, TableSpec],
    buckets: Sequence[str],
    open_tables: bool = False,
    bins: bool = False,
    relationships: Sequence[Relationship] = (),
    backend: str = "",
) -> dict[str, Any]:
    column = _column_schema(tables, open_tables, relationships)
    binned = {
        "type": "object",
        "properties": {
            "column": {**column, "description": "A numeric column."},
            "bins": {
                "anyOf": [
                    {"type": "integer", "minimum": 1, "maximum": MAX_BINS},
                    {"type": "array", "items": {"type": "number"}, "minItems": 2},
                ],
                "description": "A number of equal-width bins from the smallest to the largest "
                "matching value, or the bins' edges.",
            },
        },
        "required": ["column", "bins"],
        "additionalProperties": False,
    }
    if not buckets:
        plain = f"{backend} cannot group by a time bucket or by bins" if backend else ""
        return {
            "type": "array",
            "items": {**column, **({"description": plain} if plain else {})},
            "description": "Columns to group by; omit for one row of totals.",
        }
    bins_text = (
        " {column, bins} groups a numeric column into bins (bins: a number, or the edges): "
        "its output column bin_column (like bin_total) holds each bin's left edge; a bin holds "
        "values from its left edge up to its right one, the last one both edges."
        if bins
        else ""
    )
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
                *([binned] if bins else []),
            ]
        },
        "description": (
            "Columns to group by, or {column, bucket} to group a datetime column by day, week "
            "(weeks start on Monday), month, quarter or year, in the column's time zone. A "
            "bucket's output column is named bucket_column (like week_created_at) and holds "
            f"each bucket's start.{bins_text} Omit group_by for one summary row over all "
            "matches."
        ),
    }


def _limit_schema(max_rows: int, frame_rows: int | None, what: str) -> dict[str, Any]:
    bound = f"at most {frame_rows:,}; " if frame_rows is not None else ""
    return {
        "type": "integer",
        "minimum": 0,
        "description": (
            f"The {what} the call returns ({bound}omit for every match); you see at most "
            f"{max_rows} of them."
        ),
    }


def aggregate_schema(
    tables: Mapping[str, TableSpec],
    max_rows: int,
    rules: AggregateRules,
    open_tables: bool = False,
    frame_rows: int | None = None,
    relationships: Sequence[Relationship] = (),
) -> dict[str, Any]:
    base = select_schema(tables, max_rows, open_tables, relationships=relationships)["properties"]
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
            "group_by": group_by_schema(
                tables, rules.buckets, open_tables, rules.bins, relationships, rules.backend
            ),
            "aggregates": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "fn": _function_schema(rules),
                        "column": {**column, "description": "Omit with fn=count to count rows."},
                        **(
                            {
                                "p": {
                                    "type": "number",
                                    "minimum": 0,
                                    "maximum": 1,
                                    "description": "For percentile: 0.9 gives the 90th, "
                                    "output p90_column.",
                                }
                            }
                            if "percentile" in rules.functions
                            else {}
                        ),
                    },
                    "required": ["fn"],
                    "additionalProperties": False,
                },
                "description": "Output columns are named fn_column, or count for a row count. "
                "Default: [{fn: count}].",
            },
            **({"join": base["join"]} if relationships else {}),
            "filters": base["filters"],
            "order": order,
            "limit": _limit_schema(max_rows, frame_rows, "groups"),
            "offset": base["offset"],
        },
        "required": ["table"],
        "additionalProperties": False,
    }


def _function_schema(rules: AggregateRules) -> dict[str, Any]:
    """The functions a backend computes; the description names the ones it cannot (a model
    asking for ``std`` from PostgREST learns why, not only the list)."""
    schema: dict[str, Any] = {"type": "string", "enum": list(rules.functions)}
    same = {"avg": "mean", "mean": "avg"}  # one name is enough
    missing = [
        f
        for f in KNOWN_FUNCTIONS
        if f not in rules.functions and same.get(f) not in rules.functions
    ]
    if missing:
        listed = ", ".join(missing[:-1]) + f" or {missing[-1]}" if len(missing) > 1 else missing[0]
        schema["description"] = f"{rules.backend} cannot compute {listed}"
    return schema


def select_schema(
    tables: Mapping[str, TableSpec],
    max_rows: int,
    open_tables: bool = False,
    frame_rows: int | None = None,
    relationships: Sequence[Relationship] = (),
) -> dict[str, Any]:
    column = _column_schema(tables, open_tables, relationships)
    return {
        "type": "object",
        "properties": {
            "table": table_schema(tables, open_tables),
            **({"join": join_schema(relationships)} if relationships else {}),
            "columns": {
                "type": "array",
                "items": column,
                "description": "Columns to return; omit for all allowed columns.",
            },
            "filters": filters_schema(tables, open_tables, relationships),
            "order": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"column": column, "desc": {"type": "boolean"}},
                    "required": ["column"],
                    "additionalProperties": False,
                },
            },
            "limit": _limit_schema(max_rows, frame_rows, "rows"),
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
