"""Supabase requests from checked queries.

Every piece of a request comes from a checked value: the table from the allowlist, columns and
``order`` from plain identifiers, filters through the client's named methods (never ``or_`` or
``filter``), ``limit`` an int. See ``loom_nb.supabase`` for why filter values cannot change a
query's shape.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from loom_nb._tables.grammar import Filter, Insert, Select, Update
from loom_nb._tables.options import TableSpec
from loom_nb._tools import ToolInputError
from loom_nb.supabase._aggregate import AggregateQuery


def build_select(client: Any, query: Select) -> Any:
    columns = query.columns if query.columns is not None else ("*",)
    builder = client.table(query.table).select(*columns, count="exact" if query.count else None)
    for f in query.filters:
        builder = _apply_filter(builder, f)
    for column, desc in query.order:
        builder = builder.order(column, desc=desc)
    builder = builder.limit(int(query.limit))
    if query.offset:
        builder = builder.offset(int(query.offset))
    return builder


def build_aggregate(client: Any, query: AggregateQuery) -> Any:
    """``select=status,sum_total:total.sum()`` and the filters: PostgREST groups by the
    select's plain columns."""
    builder = client.table(query.table).select(*query.select)
    for f in query.filters:
        builder = _apply_filter(builder, f)
    for column, desc in query.order:
        builder = builder.order(column, desc=desc)
    builder = builder.limit(int(query.limit))
    if query.offset:
        builder = builder.offset(int(query.offset))
    return builder


def build_insert(client: Any, query: Insert, spec: TableSpec) -> Any:
    rows = [dict(r) for r in query.rows]
    builder = client.table(query.table).insert(
        rows, returning="representation", default_to_null=False
    )
    if spec.columns is not None:
        builder = builder.select(*spec.columns)
    return builder


def build_update(client: Any, query: Update, spec: TableSpec) -> Any:
    if not query.filters:  # parse_update refuses this already; never send one
        raise ToolInputError("an update needs at least one filter; updating every row is refused")
    builder = client.table(query.table).update(dict(query.values), returning="representation")
    for f in query.filters:
        builder = _apply_filter(builder, f)
    if spec.columns is not None:
        builder = builder.select(*spec.columns)
    return builder


def _apply_filter(builder: Any, f: Filter) -> Any:
    if f.negate:
        builder = builder.not_
    if f.op == "is_null":
        return builder.is_(f.column, None)
    if f.op == "in":
        return builder.in_(f.column, list(f.value))
    method = {
        "eq": builder.eq,
        "neq": builder.neq,
        "gt": builder.gt,
        "gte": builder.gte,
        "lt": builder.lt,
        "lte": builder.lte,
        "like": builder.like,
        "ilike": builder.ilike,
    }[f.op]
    return method(f.column, f.value)


def sendable_filters(filters: Sequence[Filter]) -> tuple[Filter, ...]:
    """``filters`` as they can be sent exactly (see :func:`_order_in_items`)."""
    return tuple(_order_in_items(f) for f in filters)


def _order_in_items(f: Filter) -> Filter:
    """PostgREST drops spaces and tabs before the first item of ``in.(...)``; items are a set,
    so put one that starts with neither first. A lone such item is sent as ``eq``."""
    if f.op != "in":
        return f
    values = list(f.value)
    if not _blank_start(values[0]):
        return f
    plain = [v for v in values if not _blank_start(v)]
    if plain:
        first = plain[0]
        return Filter(f.column, f.op, (first, *[v for v in values if v is not first]), f.negate)
    if len(set(values)) == 1:
        return Filter(f.column, "eq", values[0], f.negate)
    raise ToolInputError(
        "'in' values that all start with a space or tab cannot be sent exactly; "
        "use one eq filter per value in separate calls, or trim the values"
    )


def _blank_start(value: Any) -> bool:
    return isinstance(value, str) and value[:1] in (" ", "\t")


def check_json_values(arguments: Mapping[str, Any]) -> None:
    """Row values must be JSON: PostgREST cannot take NaN or infinity."""

    def walk(value: Any, where: str) -> None:
        if isinstance(value, float) and not math.isfinite(value):
            raise ToolInputError(f"{where}: {value!r} is not a JSON number")
        if isinstance(value, Mapping):
            for k, v in value.items():
                walk(v, f"{where}.{k}")
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, f"{where}[{i}]")

    for key in ("rows", "values"):
        if key in arguments:
            walk(arguments[key], key)
