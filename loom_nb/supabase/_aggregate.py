"""``supabase_aggregate`` (``aggregates=True``): totals computed by PostgREST's aggregate
functions, so they cover every matching row, not only ``max_rows`` of them.

The request is ``select=status,count:count(),sum_total:total.sum()`` with the usual filters:
PostgREST groups by the plain columns of the select. Every piece comes from a checked value:
the table and columns from the allowlist (plain identifiers), the function from a fixed set,
the output names made here from those. It needs ``pgrst.db_aggregates_enabled`` on the
project (off by default); without it PostgREST answers PGRST123 and the model is told so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from loom_nb._tables.grammar import (
    Filter,
    check_column,
    lookup_table,
    parse_filters,
    parse_int,
    parse_order,
)
from loom_nb._tables.options import TableSpec
from loom_nb._tables.schemas import filters_schema, select_schema
from loom_nb._tools import ToolInputError

#: PostgREST's aggregate functions (its ``AggregateFunction``), by the names it reads.
FUNCTIONS: tuple[str, ...] = ("count", "sum", "avg", "min", "max")


@dataclass(frozen=True)
class Aggregate:
    fn: str
    #: None: count rows (``count()``).
    column: str | None

    @property
    def output(self) -> str:
        return self.fn if self.column is None else f"{self.fn}_{self.column}"

    @property
    def item(self) -> str:
        """The select item PostgREST reads: ``sum_total:total.sum()``, ``count:count()``."""
        if self.column is None:
            return f"{self.output}:count()"
        return f"{self.output}:{self.column}.{self.fn}()"


@dataclass(frozen=True)
class AggregateQuery:
    table: str
    group_by: tuple[str, ...]
    aggregates: tuple[Aggregate, ...]
    filters: tuple[Filter, ...]
    order: tuple[tuple[str, bool], ...]
    limit: int
    offset: int

    @property
    def outputs(self) -> list[str]:
        return [*self.group_by, *(a.output for a in self.aggregates)]

    @property
    def select(self) -> list[str]:
        return [*self.group_by, *(a.item for a in self.aggregates)]


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
                "description": "Columns to group by; omit for one row of totals.",
            },
            "aggregates": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "fn": {"type": "string", "enum": list(FUNCTIONS)},
                        "column": {**column, "description": "Omit with fn=count to count rows."},
                    },
                    "required": ["fn"],
                    "additionalProperties": False,
                },
                "description": "Output columns are named fn_column, or count for a row count. "
                "Default: [{fn: count}].",
            },
            "filters": filters_schema(tables),
            "order": {
                **base["order"],
                "description": "Order by group_by columns (totals cannot be ordered by).",
            },
            "limit": {
                "type": "integer",
                "minimum": 0,
                "description": f"At most {max_rows} groups come back; a larger limit is cut.",
            },
            "offset": {"type": "integer", "minimum": 0},
        },
        "required": ["table"],
        "additionalProperties": False,
    }


def parse_aggregate(
    args: Mapping[str, Any], tables: Mapping[str, TableSpec], max_rows: int
) -> AggregateQuery:
    spec = lookup_table(tables, args.get("table"))
    raw_group = args.get("group_by") or []
    if not isinstance(raw_group, list):
        raise ToolInputError("group_by must be a list of column names")
    group_by = tuple(dict.fromkeys(check_column(spec, c) for c in raw_group))
    raw = args.get("aggregates") or [{"fn": "count"}]
    if not isinstance(raw, list):
        raise ToolInputError("aggregates must be a list of {fn, column} objects")
    aggregates: list[Aggregate] = []
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping) or set(item) - {"fn", "column"}:
            raise ToolInputError(f"aggregates[{i}] must be an object with 'fn' and 'column'")
        fn = item.get("fn")
        if fn not in FUNCTIONS:
            raise ToolInputError(f"aggregates[{i}].fn {fn!r} is not one of {list(FUNCTIONS)}")
        column = item.get("column")
        if column is None:
            if fn != "count":
                raise ToolInputError(f"aggregates[{i}]: {fn} needs a column")
        else:
            column = check_column(spec, column)
        agg = Aggregate(fn, column)
        if len(agg.output) > 63:  # PostgreSQL would cut the name, and the column be lost
            raise ToolInputError(f"aggregates[{i}]: the output name {agg.output!r} is too long")
        if agg.output in group_by:
            raise ToolInputError(
                f"aggregates[{i}] would be named {agg.output!r}, like a group_by column"
            )
        if agg not in aggregates:
            aggregates.append(agg)

    def group_column(i: int, name: Any) -> str:
        if name not in group_by:
            raise ToolInputError(
                f"order[{i}].column {name!r}: order by a group_by column ({list(group_by)}); "
                "PostgREST cannot order by a total"
            )
        return str(name)

    return AggregateQuery(
        table=spec.name,
        group_by=group_by,
        aggregates=tuple(aggregates),
        filters=parse_filters(spec, args.get("filters")),
        order=parse_order(args.get("order"), group_column),
        limit=min(parse_int(args.get("limit"), "limit", max_rows), max_rows),
        offset=parse_int(args.get("offset"), "offset", 0),
    )
