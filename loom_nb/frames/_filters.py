"""Filters over a frame: which rows match, with SQL's rules for missing values and LIKE."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from loom_nb._tables.grammar import Filter
from loom_nb._tools import ToolInputError
from loom_nb.frames._values import BadValue, fenced_categories, is_text, value_for

_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "eq": lambda c, v: c == v,
    "neq": lambda c, v: c != v,
    "gt": lambda c, v: c > v,
    "gte": lambda c, v: c >= v,
    "lt": lambda c, v: c < v,
    "lte": lambda c, v: c <= v,
}


def filter_mask(df: pd.DataFrame, table: str, filters: Sequence[Filter]) -> np.ndarray:
    """The rows of ``df`` that match all ``filters``; a filter that cannot work raises
    :class:`ToolInputError` with the reason."""
    mask = np.ones(len(df), dtype=bool)
    for f in filters:
        mask &= _matches(df, table, f)
    return mask


def like_regex(pattern: str) -> str:
    """A regex (for ``re.fullmatch`` with DOTALL) matching what SQL ``LIKE pattern`` matches.

    ``%`` is any text, ``_`` one character, and a backslash makes the next character literal.
    Each ``%``-separated piece is matched at its leftmost place and never revisited (an atomic
    group written as a lookahead and a back-reference), which is how LIKE can be decided, so a
    pattern like ``%a%a%a%a%b`` takes linear time instead of backtracking. The groups are
    named: a numbered back-reference past 99 is read as an octal escape, so 100 pieces
    matched nothing and 400 raised. Consecutive ``%`` are one.
    """
    pieces: list[str] = [""]
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            pieces[-1] += re.escape(pattern[i + 1])
            i += 2
            continue
        if ch == "%":
            pieces.append("")
        elif ch == "_":
            pieces[-1] += "."
        else:
            pieces[-1] += re.escape(ch)
        i += 1
    if len(pieces) == 1:
        return pieces[0]
    first, *middle, last = pieces
    out = first
    for n, piece in enumerate((p for p in middle if p), start=1):
        out += f"(?=(?P<p{n}>.*?{piece}))(?P=p{n})"
    return out + ".*" + last


def check_operator(table: str, f: Filter, col: pd.Series) -> None:
    """Refuse an operator ``col`` cannot take (either backend): ``like`` on what is not text,
    an ordering comparison on an unordered category."""
    if f.op in ("like", "ilike") and not is_text(col):
        raise ToolInputError(
            f"{f.op} works on text columns; {table}.{f.column} is {col.dtype}. "
            "Use eq, gt, lt or in instead"
        )
    ordered = f.op in ("gt", "gte", "lt", "lte")
    if ordered and isinstance(col.dtype, pd.CategoricalDtype) and not col.cat.ordered:
        raise ToolInputError(
            f"{table}.{f.column} is an unordered category; use eq, neq or in "
            f"(its values are below){fenced_categories(col)}"
        )


def check_ordered_value(table: str, f: Filter, col: pd.Series, value: Any) -> None:
    """An ordering comparison on an ordered category is by the value's place among the
    categories: refuse a value that is not one of them (either backend)."""
    if (
        f.op in ("gt", "gte", "lt", "lte")
        and isinstance(col.dtype, pd.CategoricalDtype)
        and value not in list(col.cat.categories)
    ):
        raise ToolInputError(
            f"cannot apply {f.op} to {table}.{f.column} ({col.dtype}) with {f.value!r}: "
            "it is not one of the column's categories, so it has no place in their order"
        )


def _matches(df: pd.DataFrame, table: str, f: Filter) -> np.ndarray:
    col = df[f.column]
    if f.op == "is_null":
        nulls = _as_bool(col.isna())
        return ~nulls if f.negate else nulls
    # A missing value matches no comparison, negated or not, as in SQL.
    valid = _as_bool(col.notna())
    try:
        if f.op in ("like", "ilike"):
            check_operator(table, f, col)
            hit = _like(col, f.value, f.op == "ilike")
        elif f.op == "in":
            values = [value_for(col, v) for v in f.value]
            hit = _as_bool(col.isin(values))
        else:
            value = value_for(col, f.value)
            check_operator(table, f, col)
            check_ordered_value(table, f, col, value)
            hit = _as_bool(_COMPARE[f.op](col, value))
    except BadValue as exc:
        raise ToolInputError(f"column {table}.{f.column} {exc}") from None
    except (TypeError, ValueError, OverflowError) as exc:
        raise ToolInputError(
            f"cannot apply {f.op} to {table}.{f.column} ({col.dtype}) with {f.value!r}: {exc}"
        ) from None
    out: np.ndarray = (~hit & valid) if f.negate else (hit & valid)
    return out


def _like(col: pd.Series, pattern: str, ignore_case: bool) -> np.ndarray:
    flags = re.DOTALL | (re.IGNORECASE if ignore_case else 0)
    regex = re.compile(like_regex(pattern), flags)
    values = col.astype(object).to_numpy()
    return np.fromiter(
        (isinstance(v, str) and regex.fullmatch(v) is not None for v in values),
        dtype=bool,
        count=len(values),
    )


def _as_bool(result: Any) -> np.ndarray:
    """A comparison's result as a plain bool array; pandas' NA (a missing value) is False."""
    if isinstance(result, pd.Series):
        return np.asarray(result.to_numpy(dtype=bool, na_value=False), dtype=bool)
    return np.asarray(result, dtype=bool)
