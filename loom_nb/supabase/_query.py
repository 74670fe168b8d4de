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

from loom_nb._tables.grammar import AggregateQuery, Filter, Insert, Select, Update
from loom_nb._tables.options import TableSpec
from loom_nb._tools import ToolInputError
from loom_nb.supabase._aggregate import select_items


def build_select(client: Any, query: Select, paged: bool = False) -> Any:
    builder = client.table(query.table).select(
        *select_columns(query), count="exact" if query.count else None
    )
    return _filtered_page(builder, query, paged)


def select_columns(query: Select) -> list[str]:
    """The ``select=`` items: the table's own columns (or ``*``), then one embed a join,
    built from the declared relationship only: ``customers!customer_id(tier)``, the foreign
    key column as the hint (PostgREST's ``!fk`` disambiguation), ``!inner`` when a filter
    names the joined table (``!inner`` drops the rows whose embed is empty; without it a
    filter on an embed only empties the embed)."""
    own = None if query.columns is None else [c for c in query.columns if "." not in c]
    items = ["*"] if own is None else own
    inner = {f.column.partition(".")[0] for f in query.filters if "." in f.column}
    for r in query.joins:
        named = embedded_columns(query, r.other)
        hint = f"{r.other}!{r.column}{'!inner' if r.other in inner else ''}"
        items.append(f"{hint}({','.join(named) if named else '*'})")
    return items


def embedded_columns(query: Select, other: str) -> list[str] | None:
    """The columns of ``other`` a select returns (None: every column, ``*``)."""
    if query.columns is None:
        return None
    return [c.partition(".")[2] for c in query.columns if c.startswith(f"{other}.")]


def flatten_embeds(rows: list[dict[str, Any]], query: Select) -> list[dict[str, Any]]:
    """Each row's embed (``{"customers": {"tier": "gold"}}``, or None without a match) as
    columns beside its own: ``customers.tier``."""
    if not query.joins:
        return rows
    out = []
    for row in rows:
        flat = {k: v for k, v in row.items() if k not in {r.other for r in query.joins}}
        for r in query.joins:
            embed = row.get(r.other)
            named = embedded_columns(query, r.other)
            keys = named if named is not None else list(embed or {})
            for c in keys:
                flat[f"{r.other}.{c}"] = embed.get(c) if isinstance(embed, dict) else None
        out.append(flat)
    return out


def build_aggregate(client: Any, query: AggregateQuery, paged: bool = False) -> Any:
    """``select=status,sum_total:total.sum()`` and the filters: PostgREST groups by the
    select's plain columns."""
    return _filtered_page(client.table(query.table).select(*select_items(query)), query, paged)


def _filtered_page(builder: Any, query: Select | AggregateQuery, paged: bool) -> Any:
    """A read's filters, order and page, after its select; one page of several (``paged``)
    names its offset, 0 included."""
    for f in query.filters:
        builder = _apply_filter(builder, f)
    for column, desc in query.order:
        other, _, name = column.partition(".")
        # A joined column orders the rows as PostgREST reads it: order=customers(tier).desc
        builder = builder.order(f"{other}({name})" if name else column, desc=desc)
    builder = builder.limit(int(query.limit))
    if query.offset or paged:
        builder = builder.offset(int(query.offset))
    return builder


def build_matching(
    client: Any, table: str, filters: Sequence[Filter], spec: TableSpec, n: int
) -> Any:
    """What an update's card shows: ``Prefer: count=exact`` (the rows the filters match for
    this user: the run's client, so row level security applies) and the first ``n`` of them in
    the allowed columns. One GET: a HEAD would count too, but its answer has no body, so a
    failing filter would reach the model as a bare status code."""
    builder = client.table(table).select(*_returned(spec), count="exact")
    for f in filters:
        builder = _apply_filter(builder, f)
    return builder.limit(int(n))


def _returned(spec: TableSpec) -> tuple[str, ...]:
    return spec.columns if spec.columns is not None else ("*",)


def build_insert(client: Any, query: Insert, spec: TableSpec) -> Any:
    rows = [dict(r) for r in query.rows]
    builder = client.table(query.table).insert(
        rows, returning="representation", default_to_null=False
    )
    if spec.columns is not None:
        builder = builder.select(*spec.columns)
    return builder


def build_update(
    client: Any, query: Update, spec: TableSpec, max_affected: int | None = None
) -> Any:
    """The PATCH; with ``max_affected`` it changes nothing when more rows match (supabase-py's
    ``max_affected``: ``Prefer: handling=strict, max-affected=n``, PostgREST 12.2 and later)."""
    if not query.filters:  # parse_update refuses this already; never send one
        raise ToolInputError("an update needs at least one filter; updating every row is refused")
    builder = client.table(query.table).update(dict(query.values), returning="representation")
    for f in query.filters:
        builder = _apply_filter(builder, f)
    if spec.columns is not None:
        builder = builder.select(*spec.columns)
    if max_affected is not None:
        builder = builder.max_affected(int(max_affected))
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
    """``filters`` in the form PostgREST reads exactly as the card shows them, or
    :class:`ToolInputError` naming what to send instead when PostgREST cannot express one.

    Read from PostgREST's own source (``src/PostgREST/ApiRequest/QueryParams.hs`` and
    ``Query/SqlFragment.hs``, the same in v12.2, v13 and v14):

    - ``pgFmtFilter`` maps every ``*`` of a like/ilike pattern to ``%``: a literal ``*``
      cannot be matched, so such a pattern is refused (``_`` matches any one character).
    - ``pgFmtFilter`` reads the list ``[""]`` (sent as ``in.()``) as the empty list: it is sent
      as ``eq ''``, which means what ``IN ('')`` means.
    - ``pgBuildArrayLiteral`` cuts an ``in`` item at its first NUL (``trimNullChars``), and a
      NUL in any other value is refused by PostgreSQL: values with a NUL are refused.
    - ``pListVal`` skips blanks before the first ``in`` item (see :func:`_order_in_items`).
    - A value goes out as ``str(value)``: an integral float is sent in integer form, as
      integer columns need (``1.0`` as ``1``, ``1e16`` as ``10000000000000000``).
    """
    return tuple(_sendable(i, f) for i, f in enumerate(filters))


def _sendable(i: int, f: Filter) -> Filter:
    where = f"filters[{i}]"
    if f.op == "is_null":
        return f
    if f.op == "in":
        items = tuple(sendable_value(v, f"{where}.value") for v in f.value)
        return _order_in_items(Filter(f.column, f.op, items, f.negate))
    value = sendable_value(f.value, f"{where}.value")
    if f.op in ("like", "ilike") and "*" in value:
        raise ToolInputError(
            f"{where}: PostgREST reads '*' in a {f.op} pattern as the wildcard '%', so a literal "
            "'*' cannot be matched; use '_' (any one character) in its place, or '%' if you "
            "meant any text"
        )
    return Filter(f.column, f.op, value, f.negate)


def sendable_value(value: Any, where: str) -> Any:
    """A filter or row value as PostgREST will read it: integral floats in integer form; NUL,
    text that is not valid Unicode, NaN and infinity refused (PostgreSQL and JSON cannot hold
    them)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ToolInputError(f"{where}: {value!r} is not a JSON number")
        return int(value) if value.is_integer() else value
    if isinstance(value, str):
        if "\x00" in value:
            raise ToolInputError(
                f"{where}: the text holds a NUL character (\\u0000), which PostgreSQL text "
                "cannot hold; remove it (in a like pattern, '_' matches any one character)"
            )
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ToolInputError(
                f"{where}: the text is not valid Unicode (a lone surrogate); send it as UTF-8 text"
            ) from None
    return value


def _order_in_items(f: Filter) -> Filter:
    """PostgREST drops spaces and tabs before the first item of ``in.(...)`` (``pListVal``'s
    ``lexeme (char '(')``); items are a set, so put one that starts with neither first. A list
    of one distinct item that starts with a blank, or of only ``""`` (``pgFmtFilter`` reads
    ``in.()`` as the empty list), is sent as ``eq``."""
    values = list(f.value)
    if all(v == "" for v in values):
        return Filter(f.column, "eq", "", f.negate)
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


def sendable_row(row: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Row values as they can be sent: each top-level value through :func:`sendable_value`
    (an integer column reads ``1`` but refuses ``1.0``); nested JSON is checked for what
    PostgreSQL's JSON input refuses (NaN, infinity, NUL, invalid Unicode)."""
    checked = {}
    for key, value in row.items():
        checked[key] = sendable_value(value, f"{where}.{key}")
        stack = [(value, f"{where}.{key}")]
        while stack:  # no recursion: the arguments' depth is bounded, but stay safe
            item, at = stack.pop()
            if isinstance(item, Mapping):
                for k, v in item.items():
                    sendable_value(k, f"{at} (a key)")
                    stack.append((v, f"{at}.{k}"))
            elif isinstance(item, list):
                stack.extend((v, f"{at}[{n}]") for n, v in enumerate(item))
            else:
                sendable_value(item, at)
    return checked
