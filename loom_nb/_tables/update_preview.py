"""What an update's approval card shows: how many rows it matches now, and some of them with
each new value beside the old one. Both table backends build their update cards here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

#: Matching rows shown on an update's card.
SAMPLE_ROWS = 5
#: The card's key for the number of rows the update matched when the card was made.
ROWS_MATCHED = "rows_matched"
#: The card's key for the sentence that says how many rows match now (:func:`update_effect`).
EFFECT = "effect"
NO_ROWS = "this update matches no rows"


def update_effect(matched: int, shown: int, guarantee: str) -> str:
    """``3 rows match now (all shown); ...``, or "this update matches no rows"."""
    if matched == 0:
        return NO_ROWS
    rows = f"{matched:,} row{'s' if matched != 1 else ''} match{'es' if matched == 1 else ''}"
    seen = "shown below" if shown >= matched else f"the first {shown} shown below"
    return f"{rows} now ({seen}); {guarantee}"


def rows_that_change(rows: pd.DataFrame, values: Mapping[str, Any]) -> pd.DataFrame:
    """``rows`` with each changed column twice, as it is and as it will be:
    ``status (now)``, ``status (new)``; the other columns as they are, for context."""
    out: dict[str, Any] = {}
    for column in rows.columns:
        if column in values:
            out[f"{column} (now)"] = rows[column]
            out[f"{column} (new)"] = pd.Series([values[column]] * len(rows), index=rows.index)
        else:
            out[str(column)] = rows[column]
    for column, value in values.items():
        if column not in rows.columns:  # not among the columns shown: the new value alone
            out[f"{column} (new)"] = pd.Series([value] * len(rows), index=rows.index)
    return pd.DataFrame(out, index=rows.index)


def approved_count(card: Any) -> int | None:
    """The number of matching rows the approved card showed, or None (no card, or a card
    that could not count)."""
    if isinstance(card, Mapping):
        count = card.get(ROWS_MATCHED)
        if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
            return count
    return None
