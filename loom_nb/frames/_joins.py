"""Joins of frames along declared relationships: ``merge`` on the declared keys.

A call on ``orders`` that joins ``customers`` reads ``orders`` with the columns it names of
``customers`` beside each row, written ``customers.tier``: a left join (every order stays; an
order with no customer has empty ``customers.*`` columns), or an inner one when a filter names
a joined column, as PostgREST's ``!inner`` embed does. Each order has at most one customer: a
relationship whose target key repeats is refused (``validate="many_to_one"``). Missing keys
match nothing, as in SQL. The export writes the same ``merge``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
from pandas.api.types import infer_dtype

from loom_nb._errors import UserError
from loom_nb._tables.grammar import Filter
from loom_nb._tables.options import Relationship
from loom_nb._tools import ToolInputError


def check_keys(r: Relationship, key: pd.Series, other_key: pd.Series) -> None:
    """Refuse, at definition time, a relationship whose keys hold values of kinds that never
    match (numbers and text, as ids read from a CSV or JSON may be): every join would fail."""
    kinds = _key_kind(key), _key_kind(other_key)
    if None in kinds or kinds[0] == kinds[1]:
        return
    cast = "int64" if "numbers" in kinds else "str"
    raise UserError(
        f"relationships relates {r.text}, but {r.table}.{r.column} holds {kinds[0]} "
        f"({key.dtype}) and {r.other}.{r.other_column} {kinds[1]} ({other_key.dtype}), "
        f"which never match; give both keys one dtype, e.g. "
        f"{r.other}[{r.other_column!r}] = {r.other}[{r.other_column!r}].astype({cast!r})"
    )


def _key_kind(col: pd.Series) -> str | None:
    """What a key's values are, for matching: number, text, timestamp (naive or in a time
    zone) or the dtype's own name; None when its values do not tell (an empty object column)."""
    dtype = col.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        return _key_kind(pd.Series(dtype.categories))
    if pd.api.types.is_bool_dtype(dtype):
        return "booleans"
    if pd.api.types.is_numeric_dtype(dtype):
        return "numbers"
    if isinstance(dtype, pd.StringDtype):
        return "text"
    if isinstance(dtype, pd.DatetimeTZDtype):
        return "timestamps with a time zone"
    if pd.api.types.is_datetime64_dtype(dtype):
        return "timestamps without a time zone"
    if isinstance(dtype, np.dtype) and dtype.kind == "O":
        inferred = infer_dtype(col, skipna=True)
        if inferred == "string":
            return "text"
        if inferred in ("integer", "floating", "mixed-integer-float", "decimal"):
            return "numbers"
        return None
    return str(dtype)


def joined_columns(joins: Sequence[Relationship], names: Iterable[str]) -> dict[str, list[str]]:
    """The columns of each joined table that ``names`` (``customers.tier``, ...) use, the key
    first."""
    used: dict[str, list[str]] = {r.other: [r.other_column] for r in joins}
    for name in names:
        table, _, column = name.partition(".")
        if column and table in used and column not in used[table]:
            used[table].append(column)
    return used


def inner_tables(filters: Sequence[Filter]) -> set[str]:
    """The joined tables a filter names: those joins are inner."""
    return {f.column.partition(".")[0] for f in filters if "." in f.column}


def join(
    base: pd.DataFrame,
    joins: Sequence[Relationship],
    frames: dict[str, pd.DataFrame],
    used: dict[str, list[str]],
    inner: set[str],
) -> tuple[pd.DataFrame, dict[str, int]]:
    """``base`` with the joined columns beside its rows (its index kept), and how many of its
    rows had no match in each joined table."""
    out = base
    unmatched: dict[str, int] = {}
    for r in joins:
        key = f"{r.other}.{r.other_column}"
        right = frames[r.other][used[r.other]].add_prefix(f"{r.other}.").dropna(subset=[key])
        try:
            merged = out.merge(
                right, how="left", left_on=r.column, right_on=key, validate="many_to_one"
            )
        except pd.errors.MergeError:
            raise ToolInputError(
                f"{key} repeats a value, so {r.text} does not give each {r.table} row one "
                f"{r.other} row; tell the user, whose relationship it is"
            ) from None
        except (TypeError, ValueError) as exc:
            raise ToolInputError(f"cannot join {r.other} on {r.text}: {exc}") from None
        merged = merged.set_axis(out.index)
        found = merged[key].notna()
        unmatched[r.other] = int((~found).sum())
        out = merged[found] if r.other in inner else merged
    return out, unmatched


def unmatched_text(table: str, unmatched: dict[str, int], inner: set[str]) -> str:
    """What the model is told about rows without a match."""
    notes = []
    for other, n in unmatched.items():
        if not n:
            notes.append(f"Every {table} row matched a {other} row.")
        elif other in inner:
            notes.append(
                f"{n:,} {table} row(s) had no {other} row and are left out (a filter names a "
                f"column of {other})."
            )
        else:
            notes.append(f"{n:,} {table} row(s) had no {other} row: their {other}.* are empty.")
    return " ".join(notes)
