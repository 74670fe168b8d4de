"""The frames the agent may use: what makes a frame usable, its allowed columns, its lock."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd
from pandas.api import types as ptypes

from loom_nb._context import RunContext
from loom_nb._errors import UserError
from loom_nb._tables.options import FRAME_ROWS, IDENTIFIER, RESERVED, Relationship, TableSpec
from loom_nb._tools import ToolInputError
from loom_nb.frames._namespace import Namespace, namespace_frames
from loom_nb.frames._values import holds_missing

if TYPE_CHECKING:  # DuckDB is imported only where a DuckDB table needs it
    from loom_nb.frames._duckdb import DuckTable


def check_frame(table: str, spec: TableSpec, frame: pd.DataFrame) -> None:
    """Refuse, when ``frame_tools`` is called, a frame the agent could not use as configured."""
    labels = list(frame.columns)
    if len(set(map(str, labels))) != len(labels):
        raise UserError(f"frame {table!r} has duplicate column names; make them unique first")
    if spec.columns is not None:
        missing = [c for c in spec.columns if c not in labels]
        if missing:
            raise UserError(
                f"frames[{table!r}]['columns'] names {missing}, which the frame does not have; "
                f"its columns are {[str(c) for c in labels]}"
            )
    else:
        bad = [c for c in labels if not usable_name(c)]
        if bad:
            raise UserError(
                f"frame {table!r} has columns the agent could not name: {bad}. Column names must "
                "be plain identifiers (letters, digits, '_') and not one of "
                f"{sorted(RESERVED)}. Rename them (df.rename(columns=..., inplace=True)) or "
                f"list the usable ones in frames[{table!r}]['columns']"
            )
    if spec.write:
        if not integer_index(frame.index):
            raise UserError(
                f"frame {table!r} is writable but has a {type(frame.index).__name__}: appended "
                "rows would have no index label to take. Use an integer index "
                "(df.reset_index() keeps the current index as a column) or write=False"
            )
        if spec.columns is not None:
            for col in labels:
                if col not in spec.columns and not holds_missing(frame[col].dtype):
                    raise UserError(
                        f"frame {table!r} is writable, but column {col!r} ({frame[col].dtype}) is "
                        "not in 'columns', so appended rows would leave it empty, which its "
                        f"dtype cannot hold. Add it to 'columns' or convert it "
                        "(for example to 'Int64' or 'boolean')"
                    )


def usable_name(label: Any) -> bool:
    """Can the agent name this column: a plain identifier, not a reserved word?"""
    return (
        isinstance(label, str) and bool(IDENTIFIER.match(label)) and label.lower() not in RESERVED
    )


def integer_index(index: pd.Index) -> bool:
    """Does ``index`` give appended rows a label to take (the next integer)?"""
    return not isinstance(index, pd.MultiIndex) and (
        isinstance(index, pd.RangeIndex) or ptypes.is_integer_dtype(index.dtype)
    )


class AllowedFrames:
    """The frames of one connector, by table name, with what the tools share about them.

    With a ``namespace``, the tables of a run are these and the namespace's DataFrames as the
    run finds them (:meth:`for_run`).
    """

    def __init__(
        self,
        specs: dict[str, TableSpec],
        frames: dict[str, pd.DataFrame],
        max_rows: int,
        name: str,
        namespace: Namespace | None = None,
        locks: dict[str, threading.RLock] | None = None,
        frame_rows: int | None = None,
        relationships: tuple[Relationship, ...] = (),
        duck: dict[str, DuckTable] | None = None,
    ) -> None:
        self.specs = specs
        #: Each table's DataFrame; a DuckDB table's is its zero-row sample (its columns).
        self.frames = frames
        #: The tables DuckDB runs: relations, Parquet and CSV files.
        self.duck = duck or {}
        self.max_rows = max_rows
        #: The rows of a call's DataFrame for the user (the model sees ``max_rows`` of them).
        self.frame_rows = frame_rows if frame_rows is not None else max(max_rows, FRAME_ROWS)
        #: The declared relationships a call may join along.
        self.relationships = relationships
        self.name = name
        self.namespace = namespace
        #: The namespace's DataFrames left out of this listing (more than the limit).
        self.unlisted = 0
        # Tool calls of one turn run concurrently on worker threads: one lock per frame.
        self.locks = locks if locks is not None else {t: threading.RLock() for t in frames}
        self._key = f"loom_nb.frames:{name}:{id(self)}"

    def for_run(self, ctx: RunContext | None) -> AllowedFrames:
        """The tables as run ``ctx`` sees them: the namespace is read at the run's first call
        and kept for the run, so one run's calls agree; ``None`` reads it now."""
        if self.namespace is None:
            return self
        if ctx is not None and self._key in ctx.state:
            cached: AllowedFrames = ctx.state[self._key]
            return cached
        found, unlisted = namespace_frames(self.namespace(), self.specs)
        specs = dict(self.specs)
        specs.update({n: TableSpec(n, "a DataFrame in the user's namespace") for n in found})
        locks = dict(self.locks)
        locks.update({n: threading.RLock() for n in found})
        tables = AllowedFrames(
            specs,
            {**self.frames, **found},
            self.max_rows,
            self.name,
            None,
            locks,
            self.frame_rows,
            self.relationships,
            self.duck,
        )
        tables.unlisted = unlisted
        if ctx is not None:
            ctx.state[self._key] = tables
        return tables

    def columns(self, table: str) -> list[str]:
        """The columns the agent may use, as the frame is now."""
        spec, df = self.specs[table], self.frames[table]
        if spec.columns is not None:
            return list(spec.columns)
        return [c for c in df.columns if usable_name(c)]

    def check_columns(self, table: str, names: Sequence[str]) -> None:
        """Refuse names the frame no longer has (the user may have changed it since)."""
        present = self.columns(table)
        frame_columns = set(self.frames[table].columns)
        for n in names:
            other, _, column = n.partition(".")
            if column and other in self.frames and other != table:  # a joined table's column
                self.check_columns(other, [column])
                continue
            if n not in present or n not in frame_columns:
                raise ToolInputError(f"{table!r} has no column {n!r}; its columns are {present}")

    def source(self, table: str) -> str:
        """The name the model sees on a rendered result, like ``frames.orders``."""
        return f"{self.name}.{table}"

    def locked(self, tables: Sequence[str]) -> contextlib.ExitStack:
        """The locks of ``tables``, taken in name order (two calls never wait on each other)."""
        stack = contextlib.ExitStack()
        for t in sorted(set(tables)):
            stack.enter_context(self.locks[t])
        return stack

    def lock_for(self, args: dict[str, Any]) -> Any:
        """The lock of the table ``args`` name, or none when they name no known table (the
        call is then refused when its arguments are parsed)."""
        table = args.get("table")
        if isinstance(table, str) and table in self.specs:
            return self.locks[table]
        return contextlib.nullcontext()
