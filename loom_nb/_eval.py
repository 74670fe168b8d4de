"""Evals from saved threads: replay each thread's questions with another model or other
instructions, writes off, and compare the frames it gets with the frames the thread kept.

The replay runs in a store of its own, in memory (:class:`~loom_nb.MemoryStore`): its threads
never appear in the user's thread list, take no lease on the saved threads and are kept only in
the report (``report.threads[i].replay``). Every tool that can write is swapped for one that
refuses, whatever the connector says: a tool counts as a write when it may ever wait for
approval (``needs_approval`` is not ``False``: a write connector's tools, an MCP tool not marked
read-only) or names an effect for rules. The model gets the refusal as an error result, as a
dry run would; nothing is written. Nobody answers ``ask_user`` in an eval either.

Calls are compared turn by turn (one turn a question), in order: the n-th call of a turn in
the replay against the n-th call of that turn in the saved thread. A write refused in the
replay is equal when the saved thread asked for the same write (the same tool and arguments).

Row order counts only where the saved call asked for one (an ``order`` in its arguments): a
person who sorted reads the first rows first, one who did not gets rows in whatever order the
backend returns. Rows tied on the sort columns may then come in any order.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from loom_nb import _codec, _compose, _public
from loom_nb._ask import ASK_USER, is_built_in
from loom_nb._errors import LoomError, UserError
from loom_nb._messages import Message, Thread, ToolCall, ToolResult, Usage
from loom_nb._numbers import is_check_call
from loom_nb._store import MemoryStore
from loom_nb._tools import Tool, ToolOutput

if TYPE_CHECKING:
    from loom_nb.models import Model

#: ``loom_nb.Agent`` (this module is imported by it, so it names it by this alias).
Agent = Any

__all__ = [
    "DEFAULT_SUITE",
    "EvalCall",
    "EvalReport",
    "EvalThread",
    "FrameDiff",
    "SuiteStore",
    "compare_frames",
]

#: The suite ``%loom eval add`` and ``agent.add_eval`` mark threads in when none is named.
DEFAULT_SUITE = "default"
#: Two numbers are equal when within this relative tolerance (``math.isclose``'s ``rel_tol``).
REL_TOL = 1e-9

WRITES_OFF = (
    "Writes are off in this eval run: the call was refused and nothing was written (a dry "
    "run). Go on as if the user had rejected it."
)
NO_ANSWERS = "No one answers questions in an eval run: go on without an answer."

Status = Literal["equal", "different", "missing", "extra"]


@runtime_checkable
class SuiteStore(Protocol):
    """A store that keeps eval suites: named lists of an agent's threads (every store
    loom_nb ships)."""

    def add_to_suite(
        self, agent: str, suite: str, thread_ids: Sequence[str], *, user_id: str | None = None
    ) -> None:
        """Add ``thread_ids`` to the suite (a thread already in it stays once), in one
        transaction."""

    def load_suites(self, agent: str, *, user_id: str | None = None) -> dict[str, list[str]]:
        """Every suite of the agent for this user, by name, with its thread ids as added."""


# ---- comparing frames -------------------------------------------------------------------------


@dataclass
class FrameDiff:
    """How a frame got compares with a frame kept: rows and columns missing, extra or
    different. ``different_rows`` has one row per different value: the key column's value,
    ``column``, ``kept`` and ``got`` (rows are matched by ``key``, a column whose values are
    unique in both; without one, rows are matched as wholes and there are no different rows,
    only missing and extra ones)."""

    equal: bool
    missing_rows: Any = None
    extra_rows: Any = None
    different_rows: Any = None
    missing_columns: list[str] = field(default_factory=list)
    extra_columns: list[str] = field(default_factory=list)
    key: str | None = None
    #: For results that are not frames: what differs, in words ("" when equal).
    note: str = ""
    #: The same rows, in another order than the sorted frame kept (see ``compare_frames``).
    reordered: bool = False

    def counts(self) -> tuple[int, int, int]:
        """(missing, extra, different) rows."""
        return (_rows(self.missing_rows), _rows(self.extra_rows), _rows(self.different_rows))


def _rows(frame: Any) -> int:
    return 0 if frame is None else len(frame)


def same_value(a: Any, b: Any, rel_tol: float = REL_TOL, abs_tol: float = 0.0) -> bool:
    """Whether two cells are equal: numbers within the tolerance (1 == 1.0), missing values
    equal to each other, anything else by ``==``."""
    a_missing, b_missing = _missing(a), _missing(b)
    if a_missing or b_missing:
        return a_missing and b_missing
    if _number(a) and _number(b):
        return math.isclose(float(a), float(b), rel_tol=rel_tol, abs_tol=abs_tol)
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(same_value(a[k], b[k], rel_tol, abs_tol) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(
            same_value(x, y, rel_tol, abs_tol) for x, y in zip(a, b, strict=True)
        )
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def _number(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _missing(v: Any) -> bool:
    if v is None:
        return True
    if isinstance(v, float) and math.isnan(v):
        return True
    try:
        import pandas as pd

        return v is pd.NaT or v is pd.NA or (_number(v) and math.isnan(float(v)))
    except (TypeError, ValueError):
        return False


def compare_frames(
    kept: Any,
    got: Any,
    *,
    rel_tol: float = REL_TOL,
    abs_tol: float = 0.0,
    order: Sequence[str] | None = None,
) -> FrameDiff:
    """Compare DataFrame ``got`` with ``kept``. The index is ignored (an index that is not a
    plain range is compared as columns); numbers are equal within ``rel_tol`` (and
    ``abs_tol``), whatever their dtype. Row order is ignored unless ``kept`` was sorted
    (``order``: the columns it was sorted by, ``[]`` when not known): then the same rows in
    another order differ (``reordered``), though rows tied on those columns may swap."""
    kept, got = _plain(kept), _plain(got)
    missing_columns = [str(c) for c in kept.columns if c not in got.columns]
    extra_columns = [str(c) for c in got.columns if c not in kept.columns]
    shared = [c for c in kept.columns if c in got.columns]
    key = _key(kept, got, shared)
    if key is not None:
        missing, extra, different = _by_key(kept, got, shared, key, rel_tol, abs_tol)
    else:
        missing, extra = _as_wholes(kept, got, shared, rel_tol, abs_tol)
        different = None
    equal = not (missing_columns or extra_columns or len(missing) or len(extra))
    equal = equal and (different is None or not len(different))
    reordered = equal and order is not None and _reordered(kept, got, order, rel_tol, abs_tol)
    return FrameDiff(
        equal and not reordered,
        missing,
        extra,
        different,
        missing_columns,
        extra_columns,
        None if key is None else str(key),
        "rows in another order than the saved call's order" if reordered else "",
        reordered,
    )


def _reordered(kept: Any, got: Any, order: Sequence[str], rel_tol: float, abs_tol: float) -> bool:
    """Whether the same rows come in another order: the sort columns' values row by row (by
    whole rows when the frames lack one of them)."""
    columns = [c for c in kept.columns if c in got.columns]
    by = [c for c in columns if str(c) in order]
    if order and len(by) == len(set(order)):
        columns = by
    a = kept[columns].itertuples(index=False)
    b = got[columns].itertuples(index=False)
    return not all(
        same_value(tuple(x), tuple(y), rel_tol, abs_tol) for x, y in zip(a, b, strict=True)
    )


def sorted_by(arguments: Mapping[str, Any] | None) -> list[str] | None:
    """The columns a call's ``order`` argument sorts by (``[{column, desc}]``, or names);
    ``[]`` when it sorts by what cannot be read; None when it does not sort."""
    order = arguments.get("order") if isinstance(arguments, Mapping) else None
    if not order:
        return None
    items = order if isinstance(order, list) else [order]
    columns = [i.get("column") if isinstance(i, Mapping) else i for i in items]
    return [str(c) for c in columns] if all(isinstance(c, str) for c in columns) else []


def _plain(frame: Any) -> Any:
    import pandas as pd

    index = frame.index
    plain = isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1
    return frame.reset_index(drop=plain)


def _key(kept: Any, got: Any, shared: Sequence[Any]) -> Any:
    """The first shared column that names each row in both frames: unique, no missing value,
    not a float (a measure, not a name)."""
    for c in shared:
        columns = (kept[c], got[c])
        if any(col.dtype.kind == "f" for col in columns):
            continue
        try:
            if all(col.is_unique and not col.isna().any() for col in columns):
                return c
        except TypeError:  # unhashable values (lists, dicts)
            continue
    return None


def _by_key(
    kept: Any,
    got: Any,
    shared: Sequence[Any],
    key: Any,
    rel_tol: float,
    abs_tol: float,
) -> tuple[Any, Any, Any]:
    import pandas as pd

    got_rows = {_cell(v): i for i, v in enumerate(got[key].tolist())}
    kept_keys = {_cell(v) for v in kept[key].tolist()}
    missing = kept.iloc[[i for i, v in enumerate(kept[key].tolist()) if _cell(v) not in got_rows]]
    extra = got.iloc[[j for j, v in enumerate(got[key].tolist()) if _cell(v) not in kept_keys]]
    others = [c for c in shared if c != key]
    records = []
    kept_values = {c: kept[c].tolist() for c in [key, *others]}
    got_values = {c: got[c].tolist() for c in others}
    for i, k in enumerate(kept_values[key]):
        j = got_rows.get(_cell(k))
        if j is None:
            continue
        for c in others:
            a, b = kept_values[c][i], got_values[c][j]
            if not same_value(a, b, rel_tol, abs_tol):
                records.append({str(key): k, "column": str(c), "kept": a, "got": b})
    different = pd.DataFrame(records, columns=[str(key), "column", "kept", "got"])
    return missing.reset_index(drop=True), extra.reset_index(drop=True), different


#: Rows left unmatched by exact values are paired within the tolerance only up to this many
#: comparisons (missing rows × extra rows); past it they stay missing and extra.
_PAIRING_LIMIT = 250_000


def _as_wholes(
    kept: Any, got: Any, shared: Sequence[Any], rel_tol: float, abs_tol: float
) -> tuple[Any, Any]:
    """Rows matched as wholes (over the shared columns), each row of one frame to at most one
    of the other: first by exact values, then the rest within the tolerance."""
    kept_rows = [tuple(r) for r in kept[list(shared)].itertuples(index=False)]
    got_rows = [tuple(r) for r in got[list(shared)].itertuples(index=False)]
    waiting: dict[tuple[Any, ...], list[int]] = {}
    for j, row in enumerate(got_rows):
        waiting.setdefault(tuple(_cell(v) for v in row), []).append(j)
    unmatched_kept = []
    for i, row in enumerate(kept_rows):
        found = waiting.get(tuple(_cell(v) for v in row))
        if found:
            found.pop(0)
        else:
            unmatched_kept.append(i)
    unmatched_got = sorted(j for js in waiting.values() for j in js)
    if unmatched_kept and len(unmatched_kept) * len(unmatched_got) <= _PAIRING_LIMIT:
        still = []
        for i in unmatched_kept:
            for n, j in enumerate(unmatched_got):
                if same_value(kept_rows[i], got_rows[j], rel_tol, abs_tol):
                    del unmatched_got[n]
                    break
            else:
                still.append(i)
        unmatched_kept = still
    missing = kept.iloc[unmatched_kept].reset_index(drop=True)
    extra = got.iloc[unmatched_got].reset_index(drop=True)
    return missing, extra


def _cell(v: Any) -> Any:
    """A cell as a dictionary key: numbers as floats (1 and 1.0 match), missing as one mark."""
    if _missing(v):
        return ("<missing>",)
    if _number(v):
        return float(v)
    try:
        hash(v)
    except TypeError:
        return repr(v)
    return v


def compare_results(
    kept: ToolResult | None,
    got: ToolResult | None,
    rel_tol: float,
    abs_tol: float,
    order: Sequence[str] | None = None,
) -> FrameDiff:
    """Compare two calls' results: frames by :func:`compare_frames` (``order``: what the
    saved call sorted by), anything else by its data (or its text, without data)."""
    kept_frame = kept is not None and _codec.is_dataframe(kept.data)
    got_frame = got is not None and _codec.is_dataframe(got.data)
    if kept_frame and got_frame:
        assert kept is not None and got is not None
        return compare_frames(kept.data, got.data, rel_tol=rel_tol, abs_tol=abs_tol, order=order)
    if kept_frame or got_frame:
        shown = "the saved thread" if kept_frame else "the eval"
        return FrameDiff(False, note=f"only {shown} got a DataFrame")
    if kept is None or got is None:
        return FrameDiff(False, note="no result")
    if kept.is_error != got.is_error:
        return FrameDiff(
            False, note="an error in " + ("the eval" if got.is_error else "the saved thread")
        )
    a = kept.data if kept.data is not None else kept.content
    b = got.data if got.data is not None else got.content
    if same_value(a, b, rel_tol, abs_tol):
        return FrameDiff(True)
    return FrameDiff(False, note="the results differ")


# ---- writes off -------------------------------------------------------------------------------


def is_write(t: Tool) -> bool:
    """Whether ``t`` may write: it may ever wait for approval, or names an effect for rules."""
    return t.needs_approval is not False or t.effect is not None


def writes_off(tools: Mapping[str, Tool]) -> dict[str, Tool]:
    """``tools`` with every write (and the question tool) swapped for one that refuses: the
    same name, description and input schema, so the model is told of the same tools."""

    def refusing(said: str) -> Any:
        async def refuse(*_: Any, **__: Any) -> ToolOutput:
            return ToolOutput(json.dumps({"error": said}), is_error=True)

        return refuse

    out: dict[str, Tool] = {}
    for name, t in tools.items():
        if name == ASK_USER and is_built_in(t):
            said = NO_ANSWERS
        elif is_write(t):
            said = WRITES_OFF
        else:
            out[name] = t
            continue
        out[name] = dataclasses.replace(
            t,
            function=refusing(said),
            needs_approval=False,
            preview=None,
            effect=None,
            _takes_ctx=None,
        )
    return out


# ---- the report -------------------------------------------------------------------------------


@dataclass
class EvalCall:
    """One call compared: the n-th call of a turn in the eval against the n-th of that turn in
    the saved thread. ``status`` is ``"equal"``, ``"different"``, ``"missing"`` (only the
    saved thread made it) or ``"extra"`` (only the eval made it)."""

    turn: int
    tool: str
    #: The eval's arguments (the saved thread's for a missing call).
    args: dict[str, Any] | None
    kept_args: dict[str, Any] | None
    status: Status
    equal: bool
    missing_rows: Any = None
    extra_rows: Any = None
    different_rows: Any = None
    missing_columns: list[str] = field(default_factory=list)
    extra_columns: list[str] = field(default_factory=list)
    #: A write (or a question) the eval refused: equal when the saved thread asked the same.
    refused: bool = False
    #: The same rows as the saved call's sorted frame, in another order.
    reordered: bool = False
    #: What differs, in words ("" when equal).
    note: str = ""
    call_id: str | None = None
    kept_call_id: str | None = None

    @property
    def columns(self) -> dict[str, list[str]]:
        """The columns missing and extra in this call's frame."""
        return {"missing": self.missing_columns, "extra": self.extra_columns}


@dataclass
class EvalThread:
    """One saved thread replayed: its calls compared, the last frames compared, and what each
    run took."""

    thread_id: str
    title: str | None
    calls: list[EvalCall]
    #: The last DataFrame of the eval against the saved thread's last (None: neither has one).
    final: FrameDiff | None
    #: The eval's thread (kept in memory only, in the report).
    replay: Thread | None
    kept_usage: Usage
    usage: Usage
    kept_steps: int
    steps: int
    kept_seconds: float
    seconds: float
    #: Why the replay stopped before its last question, if it did.
    error: str | None = None

    @property
    def equal(self) -> bool:
        """Every call and the last frame equal, and the replay ran to its end."""
        final = self.final is None or self.final.equal
        return self.error is None and final and all(c.equal for c in self.calls)

    def row(self) -> dict[str, Any]:
        """This thread as a row of :meth:`EvalReport.to_frame`."""
        counts = [
            (_rows(c.missing_rows), _rows(c.extra_rows), _rows(c.different_rows))
            for c in self.calls
        ]
        missing_columns = dict.fromkeys(m for c in self.calls for m in c.missing_columns)
        extra_columns = dict.fromkeys(m for c in self.calls for m in c.extra_columns)
        return {
            "thread": self.thread_id,
            "title": self.title,
            "equal": self.equal,
            "calls": len(self.calls),
            "calls_different": sum(not c.equal for c in self.calls),
            "calls_reordered": sum(c.reordered for c in self.calls),
            "missing_rows": sum(m for m, _, _ in counts),
            "extra_rows": sum(e for _, e, _ in counts),
            "different_rows": sum(d for _, _, d in counts),
            "missing_columns": ", ".join(missing_columns),
            "extra_columns": ", ".join(extra_columns),
            "final_equal": None if self.final is None else self.final.equal,
            "kept_steps": self.kept_steps,
            "steps": self.steps,
            "kept_tokens": self.kept_usage.total_tokens,
            "tokens": self.usage.total_tokens,
            "kept_cost": self.kept_usage.cost,
            "cost": self.usage.cost,
            "kept_seconds": round(self.kept_seconds, 3),
            "seconds": round(self.seconds, 3),
            "error": self.error,
        }


@dataclass
class EvalReport:
    """What ``agent.eval`` found, a thread at a time (``threads``); ``to_frame()`` is one row
    each, and the report shows itself as an HTML summary in a notebook."""

    agent: str
    model: str
    kept_models: list[str]
    instructions_changed: bool
    rel_tol: float
    abs_tol: float
    threads: list[EvalThread]
    #: Thread ids of the suite that are no longer in the store (deleted since marked).
    gone: list[str] = field(default_factory=list)
    suite: str | None = None

    @property
    def equal(self) -> bool:
        """Every thread equal."""
        return all(t.equal for t in self.threads)

    def to_frame(self) -> Any:
        """One row per thread: ``equal``, the calls that differ (and of them those whose rows
        only came in another order than the saved call sorted them), rows and columns missing,
        extra and different (added up over its calls), the last frames, and steps, tokens,
        cost (None: price unknown) and seconds of the saved thread (``kept_*``) and the eval."""
        import pandas as pd

        return pd.DataFrame([t.row() for t in self.threads], columns=_COLUMNS)

    def __repr__(self) -> str:
        """``<EvalReport 'analyst' model='...': 2 of 3 threads equal>``."""
        same = sum(t.equal for t in self.threads)
        return (
            f"<EvalReport {self.agent!r} model={self.model!r}: {same} of "
            f"{len(self.threads)} threads equal>"
        )

    def _repr_html_(self) -> str:
        """The HTML summary a notebook shows (sanitized: thread and data text is untrusted)."""
        return str(_compose.eval_html(self))


_COLUMNS = [
    "thread",
    "title",
    "equal",
    "calls",
    "calls_different",
    "calls_reordered",
    "missing_rows",
    "extra_rows",
    "different_rows",
    "missing_columns",
    "extra_columns",
    "final_equal",
    "kept_steps",
    "steps",
    "kept_tokens",
    "tokens",
    "kept_cost",
    "cost",
    "kept_seconds",
    "seconds",
    "error",
]


# ---- comparing threads ------------------------------------------------------------------------


def turns(thread: Thread) -> list[list[Message]]:
    """The thread's messages cut at each user message (each turn starts with its question)."""
    out: list[list[Message]] = []
    for m in thread.messages:
        if m.role == "user":
            out.append([m])
        elif out:
            out[-1].append(m)
    return out


def _calls(turn: Iterable[Message]) -> list[tuple[ToolCall, ToolResult | None]]:
    """The model's calls of a turn with their results (a strict number check's is loom_nb's)."""
    messages = list(turn)
    results = {r.call_id: r for m in messages for r in m.tool_results}
    return [
        (c, results.get(c.id)) for m in messages for c in m.tool_calls if not is_check_call(c.id)
    ]


def _refused(result: ToolResult | None) -> bool:
    said = result.content if result is not None and result.is_error else ""
    return WRITES_OFF in said or NO_ANSWERS in said


def compare_threads(kept: Thread, got: Thread, rel_tol: float, abs_tol: float) -> list[EvalCall]:
    """Call by call, turn by turn."""
    out: list[EvalCall] = []
    kept_turns, got_turns = turns(kept), turns(got)
    for n in range(max(len(kept_turns), len(got_turns))):
        a = _calls(kept_turns[n]) if n < len(kept_turns) else []
        b = _calls(got_turns[n]) if n < len(got_turns) else []
        for i in range(max(len(a), len(b))):
            out.append(
                _call(
                    n, a[i] if i < len(a) else None, b[i] if i < len(b) else None, rel_tol, abs_tol
                )
            )
    return out


def _call(
    turn: int,
    kept: tuple[ToolCall, ToolResult | None] | None,
    got: tuple[ToolCall, ToolResult | None] | None,
    rel_tol: float,
    abs_tol: float,
) -> EvalCall:
    if got is None:
        assert kept is not None
        call, result = kept
        rows = result.data if result is not None and _codec.is_dataframe(result.data) else None
        return EvalCall(
            turn,
            call.name,
            call.arguments,
            call.arguments,
            "missing",
            False,
            missing_rows=rows,
            note="the eval made no such call",
            kept_call_id=call.id,
        )
    call, result = got
    if kept is None:
        rows = result.data if result is not None and _codec.is_dataframe(result.data) else None
        return EvalCall(
            turn,
            call.name,
            call.arguments,
            None,
            "extra",
            False,
            extra_rows=rows,
            refused=_refused(result),
            note="the saved thread made no such call",
            call_id=call.id,
        )
    kept_call, kept_result = kept
    same_call = kept_call.name == call.name and same_value(kept_call.arguments, call.arguments, 0.0)
    if _refused(result):
        note = "" if same_call else "another write than the saved thread's"
        return EvalCall(
            turn,
            call.name,
            call.arguments,
            kept_call.arguments,
            "equal" if same_call else "different",
            same_call,
            refused=True,
            note=note,
            call_id=call.id,
            kept_call_id=kept_call.id,
        )
    diff = compare_results(kept_result, result, rel_tol, abs_tol, sorted_by(kept_call.arguments))
    note = diff.note or _counted(diff)
    if kept_call.name != call.name:
        note = f"another tool than the saved thread's ({kept_call.name})"
    equal = diff.equal and kept_call.name == call.name
    return EvalCall(
        turn,
        call.name,
        call.arguments,
        kept_call.arguments,
        "equal" if equal else "different",
        equal,
        diff.missing_rows,
        diff.extra_rows,
        diff.different_rows,
        diff.missing_columns,
        diff.extra_columns,
        note=note,
        call_id=call.id,
        kept_call_id=kept_call.id,
        reordered=diff.reordered,
    )


def _counted(diff: FrameDiff) -> str:
    """What differs in two frames, in words ("" when nothing)."""
    missing, extra, different = diff.counts()
    said = [
        f"{n} {what}"
        for n, what in (
            (missing, "rows missing"),
            (extra, "rows extra"),
            (different, "values different"),
            (len(diff.missing_columns), "columns missing"),
            (len(diff.extra_columns), "columns extra"),
        )
        if n
    ]
    return ", ".join(said)


def final_diff(
    kept: Thread, got: Thread, rel_tol: float, abs_tol: float, writes: Collection[str] = ()
) -> FrameDiff | None:
    """The eval's last DataFrame against the saved thread's last, of the calls that read
    (``writes``: the tools that write, refused in an eval)."""
    a, b = _read_frames(kept, writes), _read_frames(got, writes)
    if not a and not b:
        return None
    if a and b:
        (frame, order), (other, _) = a[-1], b[-1]
        return compare_frames(frame, other, rel_tol=rel_tol, abs_tol=abs_tol, order=order)
    if a:
        return FrameDiff(False, missing_rows=a[-1][0], note="the eval got no DataFrame")
    return FrameDiff(False, extra_rows=b[-1][0], note="the saved thread has no DataFrame")


def _read_frames(thread: Thread, writes: Collection[str]) -> list[tuple[Any, list[str] | None]]:
    """The frames the thread's reads got, each with what its call sorted by."""
    calls = {c.id: c for m in thread.messages for c in m.tool_calls}
    with _codec.collector_paused():
        return [
            (r.data, sorted_by(calls[r.call_id].arguments if r.call_id in calls else None))
            for r in thread.tool_results()
            if r.name not in writes and _codec.is_dataframe(r.data)
        ]


def _steps(thread: Thread) -> int:
    return sum(m.role == "assistant" for m in thread.messages)


def _kept_seconds(thread: Thread) -> float:
    """From each question to the last message of its turn, added up (a wait for an approval
    included)."""
    return sum((turn[-1].created_at - turn[0].created_at).total_seconds() for turn in turns(thread))


# ---- running --------------------------------------------------------------------------------


def _check_tolerance(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
        raise UserError(f"agent.eval({name}=...) is a number, 0 or more; got {value!r}")
    return float(value)


def sources(
    agent: Agent,
    threads: Sequence[str | Thread] | str | Thread | None,
    suite: str | None,
    context: Mapping[str, Any] | None,
) -> tuple[list[Thread], list[str]]:
    """The saved threads to replay, and the suite's ids that are gone."""
    if threads is not None and suite is not None:
        raise UserError("agent.eval takes threads=[...] or suite=NAME, not both")
    if isinstance(threads, str | Thread):
        threads = [threads]
    gone: list[str] = []
    if threads is None:
        name = suite or DEFAULT_SUITE
        ids = suite_threads(agent, name, context)
        if not ids:
            raise UserError(
                f"eval suite {name!r} of agent {agent.name!r} has no threads: add some with "
                f"agent.add_eval([thread_id, ...], suite={name!r}) or %loom eval add ID"
            )
        found = []
        for i in ids:
            try:
                found.append(agent.thread(i, context=context))
            except LookupError:
                gone.append(i)
        return found, gone
    out = []
    for t in threads:
        if isinstance(t, Thread):
            out.append(t)
        elif isinstance(t, str):
            out.append(agent.thread(t, context=context))
        else:
            raise UserError(
                "agent.eval(threads=[...]) takes thread ids or Thread values, got "
                + type(t).__name__
            )
    if not out:
        raise UserError("agent.eval(threads=[]) names no thread: pass thread ids or Thread values")
    return out, gone


def suite_store(agent: Agent) -> SuiteStore:
    if not isinstance(agent.store, SuiteStore):
        raise UserError(
            f"the store of agent {agent.name!r} ({type(agent.store).__name__}) keeps no eval "
            "suites (add_to_suite, load_suites); use memory_store(), sqlite_store() or "
            "postgres_store(), or pass agent.eval(threads=[...])"
        )
    return agent.store


def suite_threads(agent: Agent, suite: str, context: Mapping[str, Any] | None) -> list[str]:
    found = suite_store(agent).load_suites(agent.name, user_id=agent._user_id(context))
    return found.get(suite, [])


def add_to_suite(
    agent: Agent,
    thread_ids: Sequence[str | Thread] | str | Thread,
    suite: str,
    context: Mapping[str, Any] | None,
) -> list[str]:
    """Mark threads as suite ``suite``; every one must be this agent's (this user's)."""
    if not isinstance(suite, str) or not suite.strip():
        raise UserError(f"an eval suite needs a name (default {DEFAULT_SUITE!r}), got {suite!r}")
    if isinstance(thread_ids, str | Thread):
        thread_ids = [thread_ids]
    ids = [t.id if isinstance(t, Thread) else t for t in thread_ids]
    if not ids:
        raise UserError("agent.add_eval([...]) names no thread: pass thread ids")
    for i in ids:
        agent.thread(i, context=context)  # ThreadNotFound unless it is this user's
    user_id = agent._user_id(context)
    store = suite_store(agent)
    store.add_to_suite(agent.name, suite.strip(), ids, user_id=user_id)
    return store.load_suites(agent.name, user_id=user_id)[suite.strip()]


async def run_eval(
    agent: Agent,
    threads: Sequence[str | Thread] | str | Thread | None,
    *,
    suite: str | None,
    model: Model | str | None,
    instructions: str | None,
    rel_tol: float,
    abs_tol: float,
    context: Mapping[str, Any] | None,
) -> EvalReport:
    """Replay each thread's questions on an agent like ``agent`` (its model and instructions
    unless given), writes off, in a store of its own; compare."""
    from loom_nb.models import resolve_model

    rel_tol, abs_tol = _check_tolerance(rel_tol, "rel_tol"), _check_tolerance(abs_tol, "abs_tol")
    if instructions is not None and not isinstance(instructions, str):
        raise UserError(
            f"agent.eval(instructions=...) takes a str, got {type(instructions).__name__}"
        )
    found, gone = sources(agent, threads, suite, context)
    store = MemoryStore()
    replayer = type(agent)(
        name=agent.name,
        model=agent.model if model is None else resolve_model(model),
        instructions=agent.instructions if instructions is None else instructions,
        tools=writes_off(agent.tools),
        store=store,
        auth=agent.auth,
        max_steps=agent.max_steps,
        model_settings=agent.model_settings,
        interrupt_wait=agent.interrupt_wait,
        budget=None,  # an eval is measured, not paused
        prices=agent.prices,
        check_numbers=agent.check_numbers,  # strict: corrected as the saved thread was
    )
    writes = {name for name, t in agent.tools.items() if is_write(t)}
    out = [await _replay(replayer, kept, rel_tol, abs_tol, context, writes) for kept in found]
    kept_models = sorted({m.model for t in found for m in t.messages if m.model})
    return EvalReport(
        agent.name,
        replayer.model.name,
        kept_models,
        replayer.instructions != agent.instructions,
        rel_tol,
        abs_tol,
        out,
        gone,
        (suite or DEFAULT_SUITE) if threads is None else None,
    )


async def _replay(
    replayer: Agent,
    kept: Thread,
    rel_tol: float,
    abs_tol: float,
    context: Mapping[str, Any] | None,
    writes: Collection[str],
) -> EvalThread:
    questions = [turn[0].text for turn in turns(kept)]
    thread_id: str | None = None
    error: str | None = None
    started = time.monotonic()
    for text in questions:
        try:
            result = await replayer.run(text, thread_id=thread_id, context=context)
        except UserError:
            raise
        except LoomError as exc:  # the model failed: kept in the report, the next thread goes on
            error = f"{type(exc).__name__}: {exc}"
            made = replayer.store.list(agent=replayer.name, user_id=kept.user_id, limit=1)
            thread_id = thread_id or (made[0].id if made else None)
            break
        thread_id = result.thread_id
        if result.status != "complete":
            error = "the run paused (max_steps reached) before the question was answered"
            break
    seconds = time.monotonic() - started
    replay = replayer.thread(thread_id, context=context) if thread_id is not None else None
    got = replay if replay is not None else Thread(id="", agent=replayer.name)
    return EvalThread(
        kept.id,
        kept.title,
        compare_threads(kept, got, rel_tol, abs_tol),
        final_diff(kept, got, rel_tol, abs_tol, writes),
        replay,
        kept.usage,
        got.usage,
        _steps(kept),
        _steps(got),
        _kept_seconds(kept),
        seconds,
        error,
    )


# ``Agent.evaluate`` imports this module, maybe before anyone has named ``loom_nb.EvalReport``
# (which publishes the names of the modules imported so far): the report says loom_nb anyway.
_public.publish("loom_nb", [EvalReport])
