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

import pandas as pd

from loom_nb._tables.grammar import Filter
from loom_nb._tables.options import Relationship
from loom_nb._tools import ToolInputError


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
