"""Filters and queries as a person reads them: SQL text on the approval card, and a call in
words on its folded line (``orders · status = 'open' AND total > 100 · order by total desc ·
50 rows``)."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import Any

from loom_nb._tables.grammar import (
    Aggregate,
    AggregateQuery,
    Filter,
    GroupKey,
    Insert,
    Select,
    Update,
    percent_text,
)
from loom_nb._tables.options import Relationship

_SQL = {
    "eq": "=",
    "neq": "!=",
    "gt": ">",
    "gte": ">=",
    "lt": "<",
    "lte": "<=",
    "like": "LIKE",
    "ilike": "ILIKE",
}


def where_text(filters: Sequence[Filter]) -> str:
    """``status = 'open' AND total > 100``: the filters as a person reads them."""
    parts = []
    for f in filters:
        if f.op == "is_null":
            parts.append(f"{f.column} IS {'NOT ' if f.negate else ''}NULL")
            continue
        if f.op == "in":
            text = f"{f.column} IN ({', '.join(_literal(v) for v in f.value)})"
        else:
            text = f"{f.column} {_SQL[f.op]} {_literal(f.value)}"
        parts.append(f"NOT ({text})" if f.negate else text)
    return " AND ".join(parts)


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, float)):
        return repr(value)
    text = str(value)
    if any(unseen(ch) for ch in text):
        return _escape_string(text)
    return "'" + text.replace("'", "''") + "'"


def shown_text(text: str) -> str:
    """``text`` as a card shows a value: as it is when every character shows, else (a line
    break, a right-to-left override) as a PostgreSQL escape string, ``E'a\\nb'``. A text that
    itself reads like an escape string is written out too, so the two never look alike."""
    if any(unseen(ch) for ch in text) or (text.startswith("E'") and text.endswith("'")):
        return _escape_string(text)
    return text


def _escape_string(text: str) -> str:
    # PostgreSQL's escape string: every character that would not show (a line break, a
    # right-to-left override, a zero-width space) is written out, so the card reads true.
    return "E'" + "".join(_escaped(ch) for ch in text) + "'"


_ESCAPES = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def unseen(ch: str) -> bool:
    """Whether ``ch`` would not show as itself: a control or format character, a line or
    paragraph separator, a space other than the plain one."""
    kind = unicodedata.category(ch)
    return kind[0] == "C" or kind in ("Zl", "Zp") or (kind == "Zs" and ch != " ")


def _escaped(ch: str) -> str:
    if ch in _ESCAPES:
        return _ESCAPES[ch]
    if unseen(ch):
        return f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}"
    return ch


def filter_dict(f: Filter) -> dict[str, Any]:
    """A filter as the model wrote it: ``{column, op, value, not}``."""
    out: dict[str, Any] = {"column": f.column, "op": f.op}
    if f.op != "is_null":
        out["value"] = list(f.value) if isinstance(f.value, tuple) else f.value
    if f.negate:
        out["not"] = True
    return out


def select_words(q: Select, *, columns_named: bool) -> str:
    """A select in words; the columns appear when the model named them."""
    parts = [q.table, *join_words(q.joins)]
    if columns_named and q.columns is not None:
        parts.append(", ".join(q.columns))
    return " · ".join([*parts, *query_tail(q.filters, q.order, q.asked, q.offset)])


def query_tail(
    filters: Sequence[Filter],
    order: Sequence[tuple[str, bool]],
    limit: int | None,
    offset: int,
) -> list[str]:
    """The filter, the order and the page, each a piece of a call's words (when present).
    The page is what the model asked for (``limit 50 from offset 100``); what came back is
    the result's to say (``loom_nb._counts``)."""
    parts = []
    if filters:
        parts.append(where_text(filters))
    if order:
        parts.append("order by " + ", ".join(f"{c} desc" if d else c for c, d in order))
    page = page_words(limit, offset)
    if page:
        parts.append(page)
    return parts


def page_words(limit: int | None, offset: int) -> str:
    """``limit 50``, ``from offset 100``, both, or nothing."""
    words = [] if limit is None else [f"limit {limit:,}"]
    if offset:
        words.append(f"from offset {offset:,}")
    return " ".join(words)


def insert_words(q: Insert) -> str:
    return f"{q.table} · {len(q.rows)} row{'' if len(q.rows) == 1 else 's'}"


def update_words(q: Update) -> str:
    values = ", ".join(f"{k} = {_value(v)}" for k, v in q.values.items())
    return f"{q.table} · set {values} · {where_text(q.filters)}"


def _value(value: Any) -> str:
    return "NULL" if value is None else _literal(value)


def group_words(keys: Sequence[GroupKey]) -> list[str]:
    """``status``, ``week of created_at``: each group_by entry as a person reads it."""
    return [_group_word(k) for k in keys]


def _group_word(k: GroupKey) -> str:
    if isinstance(k.bins, tuple):
        return f"{k.column} in bins {', '.join(f'{e:g}' for e in k.bins)}"
    if k.bins is not None:
        return f"{k.column} in {k.bins} bin{'' if k.bins == 1 else 's'}"
    return k.column if k.bucket is None else f"{k.bucket} of {k.column}"


def aggregate_word(a: Aggregate) -> str:
    """``count``, ``sum(total)``, ``p90(total)``."""
    if a.column is None:
        return a.fn
    if a.fn == "percentile" and a.p is not None:
        return f"p{percent_text(a.p).replace('_', '.')}({a.column})"
    return f"{a.fn}({a.column})"


def aggregate_words(q: AggregateQuery) -> str:
    """``orders · count, sum(total) by status · status = 'open' · 50 groups``."""
    summary = ", ".join(aggregate_word(a) for a in q.aggregates)
    groups = group_words(q.group_by)
    if groups:
        summary += " by " + ", ".join(groups)
    return " · ".join(
        [q.table, *join_words(q.joins), summary, *query_tail(q.filters, q.order, q.asked, q.offset)]
    )


def join_words(joins: Sequence[Relationship]) -> list[str]:
    """``join customers on orders.customer_id = customers.id``, one piece a join."""
    return [f"join {r.other} on {r.text}" for r in joins]
