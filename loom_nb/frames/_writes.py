"""The write tools: append and update, checked in full before approval and done in place on
the very DataFrame object the user passed (see ``loom_nb.frames``, "Writes and in place")."""

from __future__ import annotations

import threading
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from loom_nb._messages import arguments_digest
from loom_nb._render import frame_for_model
from loom_nb._tables.filter_text import where_text
from loom_nb._tables.grammar import parse_insert, parse_update
from loom_nb._tools import ToolInputError, ToolOutput
from loom_nb.frames._allowlist import Tables, integer_index
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

    def __init__(self, tables: Tables, approve_writes: bool) -> None:
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

    def update(self, args: dict[str, Any]) -> ToolOutput:
        return self._write(args, self.plan_update, self._do_update)

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
            assert plan.mask is not None
            rows = self._first_rows(plan.table, plan.mask)
        return {
            "table": plan.table,
            "changes": plan.values,
            "where": plan.where,
            "rows_matched": int(plan.mask.sum()),
            "matching_rows": rows,
            **memory_notes(plan.table),
        }

    def _first_rows(self, table: str, mask: np.ndarray) -> pd.DataFrame:
        """A copy of the first ``max_rows`` rows ``mask`` selects, in the allowed columns."""
        df = self.tables.frames[table]
        return df.loc[mask].iloc[: self.tables.max_rows][self.tables.columns(table)].copy()


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
    """
    combined = pd.concat([df, new_rows])
    labels, index = df.columns, df.index
    saved = [df.iloc[:, i] for i in range(df.shape[1])]
    try:
        for label in list(labels):
            del df[label]
        for label in new_rows.index:
            df.loc[label] = pd.Series(dtype=object)
        df.index = combined.index
        for i, label in enumerate(labels):
            df.insert(i, label, combined.iloc[:, i].array, allow_duplicates=True)
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
    df.index = index
    for i, (label, col) in enumerate(zip(labels, saved, strict=True)):
        df.insert(i, label, col.array, allow_duplicates=True)
    df.columns = labels
