"""The write tools: append and update, checked in full before approval and done in place on
the very DataFrame object the user passed (see ``loom_nb.frames``, "Writes and in place")."""

from __future__ import annotations

import hashlib
import threading
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from loom_nb._context import RunContext
from loom_nb._messages import arguments_digest
from loom_nb._render import frame_for_model
from loom_nb._tables.filter_text import where_text
from loom_nb._tables.grammar import parse_insert, parse_update
from loom_nb._tables.update_preview import (
    EFFECT,
    ROWS_MATCHED,
    SAMPLE_ROWS,
    approved_count,
    rows_that_change,
    update_effect,
)
from loom_nb._tools import ToolInputError, ToolOutput
from loom_nb.frames._allowlist import AllowedFrames, integer_index
from loom_nb.frames._filters import filter_mask
from loom_nb.frames._values import BadValue, holds_missing, value_to_write


@dataclass
class Plan:
    """A checked write: what will change, computed before anything changes."""

    table: str
    new_rows: pd.DataFrame | None = None
    values: dict[str, Any] | None = None
    mask: np.ndarray | None = None
    where: str = ""


class Writes:
    """append and update over ``tables``, each planned (every value converted, every row
    matched) under the frame's lock before anything is written."""

    def __init__(self, tables: AllowedFrames, approve_writes: bool) -> None:
        self.tables = tables
        self.approve_writes = approve_writes
        # Write calls answered with an error instead of an approval request: they never write.
        self._refused: Counter[str] = Counter()
        self._refused_lock = threading.Lock()

    # -- plans --

    def plan_append(self, args: dict[str, Any]) -> Plan:
        ins = parse_insert(args, self.tables.specs)
        table = ins.table
        df = self.tables.frames[table]
        allowed = self.tables.columns(table)
        self.tables.check_columns(table, sorted({c for r in ins.rows for c in r}))
        if not integer_index(df.index):
            raise ToolInputError(
                f"{table!r} no longer has an integer index, so rows cannot be appended"
            )
        columns: dict[Any, Any] = {}
        for col in df.columns:
            dtype = df[col].dtype
            values: list[Any] = []
            for i, row in enumerate(ins.rows):
                value = row.get(col) if col in allowed else None
                if value is None:
                    if not holds_missing(dtype):
                        raise ToolInputError(
                            f"rows[{i}] has no value for {table}.{col} ({dtype}), which cannot "
                            "be empty"
                        )
                    values.append(None)
                    continue
                try:
                    converted = value_to_write(df[col], value)
                except BadValue as exc:
                    raise ToolInputError(f"rows[{i}]: column {table}.{col} {exc}") from None
                values.append(converted)
            columns[col] = values
        start = int(df.index.max()) + 1 if len(df) else 0
        index: pd.Index = pd.RangeIndex(start, start + len(ins.rows), name=df.index.name)
        try:
            new_rows = pd.DataFrame(
                {c: pd.Series(v, dtype=df[c].dtype, index=index) for c, v in columns.items()},
                index=index,
                columns=df.columns,
            )
        except (TypeError, ValueError, OverflowError) as exc:
            raise ToolInputError(f"the rows do not fit the columns of {table!r}: {exc}") from None
        return Plan(table, new_rows=new_rows)

    def plan_update(self, args: dict[str, Any]) -> Plan:
        up = parse_update(args, self.tables.specs)
        table = up.table
        df = self.tables.frames[table]
        self.tables.check_columns(table, [*up.values, *(f.column for f in up.filters)])
        values: dict[str, Any] = {}
        for col, value in up.values.items():
            dtype = df[col].dtype
            if value is None:
                if not holds_missing(dtype):
                    raise ToolInputError(f"{table}.{col} ({dtype}) cannot be set to empty (null)")
                values[col] = None
                continue
            try:
                converted = value_to_write(df[col], value)
            except BadValue as exc:
                raise ToolInputError(f"values: column {table}.{col} {exc}") from None
            values[col] = converted
        mask = filter_mask(df, table, up.filters)
        return Plan(table, values=values, mask=mask, where=where_text(up.filters))

    # -- before approval --

    def check_append(self, args: dict[str, Any]) -> None:
        self._check(args, self.plan_append)

    def check_update(self, args: dict[str, Any]) -> None:
        self._check(args, self.plan_update)

    def _check(self, args: dict[str, Any], plan: Callable[[dict[str, Any]], Plan]) -> None:
        """Plan the write as the frame is now; raises :class:`ToolInputError` when it cannot
        work. Such a call is answered at once instead of being approved, so it is remembered:
        it never writes (see :meth:`_write`)."""
        try:
            with self.tables.lock_for(args):
                plan(args)
        except ToolInputError:
            with self._refused_lock:
                self._refused[arguments_digest(args)] += 1
            raise

    def _write(
        self,
        args: dict[str, Any],
        plan: Callable[[dict[str, Any]], Plan],
        write: Callable[[Plan], ToolOutput],
    ) -> ToolOutput:
        """Run a write. A call that was answered instead of being sent for approval (its
        arguments could not work when it was checked) never writes, even if they work now."""
        refused = False
        if self.approve_writes:
            digest = arguments_digest(args)
            with self._refused_lock:
                if self._refused[digest] > 0:
                    refused = True
                    self._refused[digest] -= 1
                    if not self._refused[digest]:
                        del self._refused[digest]
        with self.tables.lock_for(args):
            checked = plan(args)  # raises the precise error for the model
            if refused:
                raise ToolInputError(
                    "the table changed while this call was checked; nothing was written. "
                    "Send the call again to ask the user for approval"
                )
            return write(checked)

    # -- the tools --

    def append(self, args: dict[str, Any]) -> ToolOutput:
        return self._write(args, self.plan_append, self._do_append)

    def _do_append(self, plan: Plan) -> ToolOutput:
        assert plan.new_rows is not None
        table, added = plan.table, plan.new_rows
        df = self.tables.frames[table]
        append_in_place(df, added)
        text = (
            f"Appended {len(added)} row(s) to {table!r}; it now has {len(df):,} rows. "
            f"{in_memory_only(table)}\n"
        )
        text += frame_for_model(
            added, source=self.tables.source(table), max_rows=self.tables.max_rows
        )
        return ToolOutput(text, added.iloc[: self.tables.max_rows].copy())

    def update(self, args: dict[str, Any], ctx: RunContext | None = None) -> ToolOutput:
        """After approval, the update runs only on the very rows its card matched: the user
        keeps working while a card waits, and a changed frame changes nothing."""
        if not self.approve_writes:  # no card to hold it to
            return self._write(args, self.plan_update, self._do_update)
        card = ctx.approved_preview if ctx is not None else None

        def checked(plan: Plan) -> ToolOutput:
            assert plan.mask is not None
            table, now = plan.table, int(plan.mask.sum())
            shown = approved_count(card)
            if shown is None or not isinstance(card, dict):
                return _unchanged(
                    f"the approval card did not record the rows this update matches ({table!r} "
                    "is unchanged)"
                )
            if shown != now or card.get(_MATCHED_ROWS) != _rows_key(self.tables, table, plan.mask):
                was = f"{shown:,} row{'s' if shown != 1 else ''}"
                return _unchanged(
                    f"{table!r} changed since the approval card was shown: the update matched "
                    f"{was} then and {now:,} now, or other rows"
                )
            return self._do_update(plan)

        return self._write(args, self.plan_update, checked)

    def _do_update(self, plan: Plan) -> ToolOutput:
        assert plan.values is not None and plan.mask is not None
        table, mask = plan.table, plan.mask
        df = self.tables.frames[table]
        for col, value in plan.values.items():
            df.loc[mask, col] = value
        count = int(mask.sum())
        changed = self._first_rows(table, mask)
        text = (
            f"Updated {count:,} row(s) of {table!r} where {plan.where}. {in_memory_only(table)}\n"
        )
        text += frame_for_model(
            changed,
            source=self.tables.source(table),
            max_rows=self.tables.max_rows,
            total_rows=count,
        )
        return ToolOutput(text, changed)

    def preview_append(self, args: dict[str, Any]) -> Any:
        with self.tables.lock_for(args):
            plan = self.plan_append(args)
        return {"table": plan.table, "rows": plan.new_rows, **memory_notes(plan.table)}

    def preview_update(self, args: dict[str, Any]) -> Any:
        with self.tables.lock_for(args):
            plan = self.plan_update(args)
            assert plan.mask is not None and plan.values is not None
            matched = int(plan.mask.sum())
            rows = self._first_rows(plan.table, plan.mask, SAMPLE_ROWS)
            key = _rows_key(self.tables, plan.table, plan.mask)
        card: dict[str, Any] = {
            "table": plan.table,
            EFFECT: update_effect(matched, len(rows), _GUARANTEE),
            "where": plan.where,
            "changes": plan.values,
            ROWS_MATCHED: matched,
            **memory_notes(plan.table),
        }
        if matched:
            card["rows that change"] = rows_that_change(rows, plan.values)
        card[_MATCHED_ROWS] = key
        return card

    def _first_rows(self, table: str, mask: np.ndarray, n: int | None = None) -> pd.DataFrame:
        """A copy of the first ``n`` (``max_rows``) rows ``mask`` selects, in the allowed
        columns."""
        df = self.tables.frames[table]
        rows = df.loc[mask].iloc[: self.tables.max_rows if n is None else n]
        return rows[self.tables.columns(table)].copy()


#: The card's key for which rows its update matched (a digest of their index labels).
_MATCHED_ROWS = "_matched_rows"
_GUARANTEE = "if other rows match when it runs, nothing is changed"


def _rows_key(tables: AllowedFrames, table: str, mask: np.ndarray) -> str:
    """A digest of the index labels of the rows ``mask`` selects: equal keys, same rows."""
    labels = tables.frames[table].index[mask]
    digest = hashlib.sha256(str(len(labels)).encode())
    digest.update(pd.util.hash_pandas_object(labels, index=False).to_numpy().tobytes())
    return digest.hexdigest()[:32]


def _unchanged(why: str) -> ToolOutput:
    return ToolOutput(
        f"Nothing was updated: {why}. Send the update again so the user sees the rows it "
        "matches now.",
        is_error=True,
    )


def in_memory_only(table: str) -> str:
    """For the model: the write changed the DataFrame in the kernel, no file (so it can say so)."""
    return (
        f"Only the DataFrame {table!r} in the notebook's memory changed; no file was written "
        f"(the user keeps it by saving it, e.g. {table}.to_csv(...))."
    )


def memory_notes(table: str) -> dict[str, str]:
    """What the approval card says before and after: the DataFrame in memory changes, files
    do not, and how to keep the change."""
    save = f"{table}.to_csv(...)"
    return {
        "note": (
            f"This changes the DataFrame {table!r} in this kernel's memory only; files are not "
            f"changed. To keep the change, save it yourself, e.g. {save}"
        ),
        "after": (
            f"the DataFrame {table!r} changed in memory; files did not: save it to keep it, "
            f"e.g. {save}"
        ),
    }


def append_in_place(df: pd.DataFrame, new_rows: pd.DataFrame) -> None:
    """Add ``new_rows`` (same columns, same dtypes) to the object ``df`` itself.

    pandas has no in-place append, and its ``inplace=`` keywords are being deprecated (PDEP-8).
    The public operations that change the object itself are column deletion and insertion,
    ``.loc`` enlargement and setting ``.index``/``.columns``. So: build the result with
    ``pd.concat`` (dtypes kept exactly: categoricals, tz-aware timestamps, nullable integers),
    take the columns out of ``df``, grow its index by enlargement (cheap without columns), and
    put the columns of the result back. If a step fails, ``df`` is put back as it was.

    The columns go back as Series, which keep their dtype (pandas 3 reads an array of text as
    its string dtype, so an object column would change), on a positional index that the
    result's then replaces (a Series is aligned on its labels, which may repeat).
    """
    combined = pd.concat([df, new_rows])
    labels, index = df.columns, df.index
    saved = [df.iloc[:, i] for i in range(df.shape[1])]
    try:
        for label in list(labels):
            del df[label]
        for label in new_rows.index:
            df.loc[label] = pd.Series(dtype=object)
        df.index = pd.RangeIndex(len(combined))
        for i, label in enumerate(labels):
            column = combined.iloc[:, i].reset_index(drop=True)
            df.insert(i, label, column, allow_duplicates=True)
        df.index = combined.index
        df.columns = labels
    except BaseException:
        _restore(df, labels, index, saved)
        raise


def _restore(df: pd.DataFrame, labels: pd.Index, index: pd.Index, saved: list[pd.Series]) -> None:
    for label in list(df.columns):
        del df[label]
    if len(df) != len(index):
        with warnings.catch_warnings():  # the one way to shrink the object itself
            warnings.simplefilter("ignore")
            df.drop(index=df.index[len(index) :], inplace=True)
    df.index = pd.RangeIndex(len(index))
    for i, (label, col) in enumerate(zip(labels, saved, strict=True)):
        df.insert(i, label, col.reset_index(drop=True), allow_duplicates=True)
    df.index = index
    df.columns = labels
