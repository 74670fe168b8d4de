"""Filters as a person reads them, on the approval card: SQL text and plain objects."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import Any

from loom_nb._tables.grammar import Filter

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
    if any(_unseen(ch) for ch in text):
        # PostgreSQL's escape string: every character that would not show (a line break, a
        # right-to-left override, a zero-width space) is written out, so the card reads true.
        return "E'" + "".join(_escaped(ch) for ch in text) + "'"
    return "'" + text.replace("'", "''") + "'"


_ESCAPES = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _unseen(ch: str) -> bool:
    kind = unicodedata.category(ch)
    return kind[0] == "C" or kind in ("Zl", "Zp") or (kind == "Zs" and ch != " ")


def _escaped(ch: str) -> str:
    if ch in _ESCAPES:
        return _ESCAPES[ch]
    if _unseen(ch):
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
