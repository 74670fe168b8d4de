"""The aggregate tool's query: its JSON schema, its parsing and checks, and its computation with
SQL's rules (a sum of no values is missing; count_distinct and median ignore missing values)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from loom_nb._tables.grammar import (
    Filter,
    GroupKey,
    check_column,
    lookup_table,
    parse_filters,
    parse_group_by,
    parse_int,
    parse_order,
)
from loom_nb._tables.options import IDENTIFIER, TableSpec
from loom_nb._tables.schemas import filters_schema, group_by_schema, select_schema
from loom_nb._tools import ToolInputError
from loom_nb.frames._buckets import bucket_keys, bucket_labels
from loom_nb.frames._values import dtype_kind

AGGREGATE_FUNCTIONS: tuple[str, ...] = (
    "count",
    "count_distinct",
    "sum",
    "mean",
    "median",
    "min",
    "max",
)


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
    group_by: tuple[GroupKey, ...]
    aggregates: tuple[Aggregate, ...]
    filters: tuple[Filter, ...]
    order: tuple[tuple[str, bool], ...]
    limit: int
    offset: int


def aggregate_schema(
    tables: Mapping[str, TableSpec], max_rows: int, open_tables: bool = False
) -> dict[str, Any]:
    base = select_schema(tables, max_rows, open_tables)["properties"]
    column = base["columns"]["items"]
    return {
        "type": "object",
        "properties": {
            "table": base["table"],
            "group_by": group_by_schema(tables, open_tables),
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
            "filters": filters_schema(tables, open_tables),
            "order": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "column": {
                            "type": "string",
                            "pattern": IDENTIFIER.pattern,
                            "description": (
                                "A group_by output (like status or week_created_at) or an "
                                "aggregate's output name like sum_total."
                            ),
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
                "description": (
                    f"At most {max_rows} groups come back; a larger limit is cut to that."
                ),
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
    group_by = parse_group_by(spec, args.get("group_by"))
    group_outputs = {k.output for k in group_by}
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
            col = check_column(spec, col)
        agg = Aggregate(fn, col)
        if agg.output in group_outputs:
            raise ToolInputError(
                f"aggregates[{i}] would be named {agg.output!r}, like a group_by column"
            )
        if agg not in aggs:
            aggs.append(agg)
    outputs = group_outputs | {a.output for a in aggs}

    def output_column(i: int, name: Any) -> str:
        if name not in outputs:
            raise ToolInputError(
                f"order[{i}].column {name!r} is not an output column; use one of {sorted(outputs)}"
            )
        return str(name)

    order = parse_order(args.get("order"), output_column)
    return AggregateQuery(
        table=spec.name,
        group_by=group_by,
        aggregates=tuple(aggs),
        filters=parse_filters(spec, args.get("filters")),
        order=tuple(order),
        limit=min(parse_int(args.get("limit"), "limit", max_rows), max_rows),
        offset=parse_int(args.get("offset"), "offset", 0),
    )


def check_aggregate(table: str, col: pd.Series, agg: Aggregate) -> None:
    """Refuse an aggregate that ``col``'s dtype cannot give, before anything is computed."""
    kind = dtype_kind(col.dtype)
    if agg.fn in ("sum", "mean", "median"):
        numeric = kind in ("int", "float", "bool", "timedelta")
        ok = numeric or (kind == "datetime" and agg.fn != "sum")
        if not ok:
            raise ToolInputError(
                f"{agg.fn} needs a numeric column; {table}.{agg.column} is {col.dtype}. "
                "Use count, count_distinct, min or max"
            )
    if agg.fn in ("min", "max") and kind == "category" and not col.cat.ordered:
        raise ToolInputError(
            f"{table}.{agg.column} is an unordered category, so it has no {agg.fn}; "
            "group by it instead"
        )


def _apply(target: Any, a: Aggregate) -> Any:
    """One aggregate of a Series or a grouped Series. A sum of no values is missing, as in SQL
    (pandas would say 0); count_distinct is SQL's count(DISTINCT column)."""
    if a.fn == "sum":
        return target.sum(min_count=1)
    if a.fn == "count_distinct":
        return target.nunique()
    return getattr(target, a.fn)()


def compute_aggregate(sub: pd.DataFrame, q: AggregateQuery) -> pd.DataFrame:
    """One row per group (missing values form a group, as SQL's GROUP BY does), or one row."""
    if not q.group_by:
        row = {
            a.output: [len(sub) if a.column is None else _apply(sub[a.column], a)]
            for a in q.aggregates
        }
        return pd.DataFrame(row)
    keys = [
        sub[k.column] if k.bucket is None else bucket_keys(sub[k.column], k.bucket)
        for k in q.group_by
    ]
    grouped = sub.groupby(
        [key.rename(k.output) for key, k in zip(keys, q.group_by, strict=True)],
        dropna=False,
        observed=True,
        sort=True,
    )
    parts = {
        a.output: grouped.size() if a.column is None else _apply(grouped[a.column], a)
        for a in q.aggregates
    }
    out = pd.DataFrame(parts).reset_index()
    for k in q.group_by:
        if k.bucket is not None:
            out[k.output] = bucket_labels(out[k.output], sub[k.column], k.bucket)
    return out
