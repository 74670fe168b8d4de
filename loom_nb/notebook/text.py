"""The thread as plain text, for terminal IPython and scripts (same magics, no widgets)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, TextIO

from loom_nb import _words
from loom_nb._agent import RunResult
from loom_nb._ask import choices_of, is_question
from loom_nb._chart import Chart
from loom_nb._codec import FrameHead, frame_head
from loom_nb._counts import counts_text
from loom_nb._events import ApprovalRequested, MessageAdded, RunEvent
from loom_nb._inert import inert
from loom_nb._messages import (
    NEWER,
    Message,
    PendingApproval,
    Resolution,
    Thread,
    ToolResult,
    Usage,
    is_pause_call,
)
from loom_nb._numbers import TracedNumber
from loom_nb._shown import Kind, Shown, shown
from loom_nb._tools import Tool
from loom_nb._user_errors import preview_key
from loom_nb.models import TextDelta
from loom_nb.notebook._calls import CallText
from loom_nb.notebook._html import card_parts
from loom_nb.notebook._tracebacks import traceback_text
from loom_nb.notebook.history import numbers_by_id
from loom_nb.notebook.session import RunInterrupted, interruption


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def format_frame(df: Any, rows: int) -> str:
    """The frame's shape and its first ``rows`` rows, as text; "… N more rows" below."""
    found = frame_head(df, max(rows, 0))
    assert found is not None, "format_frame takes a DataFrame"
    return head_text(found)


def head_text(found: FrameHead) -> str:
    """:func:`format_frame` of a frame's first rows (all a saved frame needs decoded)."""
    more = found.rows - len(found.head)
    footer = f"\n{_words.more_rows(more)}" if more > 0 else ""
    said = f" · {counts_text(found.counts)}" if found.counts is not None else ""
    shape = _words.shape(found.rows, found.columns)
    return f"[DataFrame {shape}{said}]\n{found.head.to_string(max_cols=20)}{footer}"


def format_pending(p: PendingApproval, rows: int, *, now: bool = False) -> str:
    """A call waiting for a decision, what it would write (or ran with), and how to decide;
    ``now``: its preview was read again as the data is now."""
    if is_question(p) and p.state == "pending":
        lines = [f"? the agent asks (call {p.call_id}): {p.arguments.get('question', '')}"]
        choices = choices_of(p)
        if choices:
            lines.append("  choices: " + " | ".join(choices))
        lines.append(f"  answer: %loom answer {p.call_id} TEXT")
        return "\n".join(lines)
    if p.state == "unknown":
        lines = [f"⚠ {p.tool} {_words.UNKNOWN} (call {p.call_id}). {_words.UNKNOWN_WHY}"]
    elif p.state == "running":
        lines = [f"⏳ {p.tool} {_words.RUNNING_ELSEWHERE} (call {p.call_id})"]
    elif p.newer:
        return f"? {p.tool} is {p.state!r} (call {p.call_id}): {NEWER}"
    elif is_pause_call(p.call_id) and p.state == "pending":  # a budget / max_steps pause
        return (
            f"⏸ the run paused at its {p.tool} (call {p.call_id}): {p.preview}\n"
            f"  continue: %loom approve {p.call_id}   stop: %loom reject {p.call_id}"
        )
    else:
        lines = [f"✋ {p.tool} {_words.WAITS} (call {p.call_id})"]
    if now:
        lines.append(f"  ℹ {_words.ROWS_NOW}")
    # what it was asked to write; for an unknown outcome, the exact arguments it ran with
    preview = p.preview if p.state != "unknown" else None
    for part in card_parts(preview, p.arguments):
        if part.note:
            lines.append(f"  ℹ {part.sentence}")
        elif part.sentence:
            lines.append(f"  {part.sentence}")
        elif part.frame is not None:
            lines.append(f"  {part.label}:")
            text = (
                format_frame(part.frame, rows) if part.index else part.frame.to_string(index=False)
            )
            lines.extend("    " + line for line in text.splitlines())
        else:
            lines.append(f"  {part.label}: {part.text}")
    where = traceback_text(preview_key(p.call_id))  # a preview that raised in this kernel
    if where and p.state != "unknown":
        lines.extend(f"    {line}" for line in where.splitlines())
    if p.state == "unknown":
        lines.append(
            f"  it happened, go on: %loom resolve {p.call_id} happened   it did not, run it "
            f"again: %loom resolve {p.call_id} retry   tell the agent it failed: "
            f"%loom resolve {p.call_id} failed"
        )
    elif p.state == "pending":
        lines.append(f"  approve: %loom approve {p.call_id}   reject: %loom reject {p.call_id}")
    elif p.state != "running":  # decided; runs with the others, or its kernel stopped first
        word = "approve" if p.state == "approved" else "reject"
        lines.append(
            f"  {_words.not_run_yet(p.state)}: once no other call of this turn waits, "
            f"%loom {word} {p.call_id} goes on"
        )
    return "\n".join(lines)


def _badge(s: Shown) -> str:
    return f" [{s.approval}{f' {s.rule}' if s.rule else ''}]" if s.approval else ""


def _error_text(s: Shown) -> str:
    line = f"  ⚠ {s.tool}{_badge(s)} {_words.FAILED} {_short(s.text)}\n"
    where = traceback_text(s.call_id)  # the user's code, if it raised in this kernel
    return line + "".join(f"      {line}\n" for line in where.splitlines()) if where else line


def _indented(head: str, text: str) -> str:
    return head + "".join(f"    {line}\n" for line in text.splitlines())


#: What each kind of call prints, its frames cut to ``rows`` rows (PENDING and UNKNOWN: the
#: waiting call with how to decide it, :func:`format_pending`).
RESULT_TEXT: dict[Kind, Callable[[Shown, int], str]] = {
    Kind.FRAME: lambda s, rows: _indented(
        f"  ← {s.tool}{_badge(s)}:\n", head_text(s.head) if s.head is not None else ""
    ),
    Kind.CHART: lambda s, rows: (
        f"  ← {s.tool}{_badge(s)}: [chart: {Chart(s.chart or {}).caption}]\n"
    ),
    Kind.REJECTED: lambda s, rows: f"  ✘ {s.tool} {_words.REJECTED}\n",
    Kind.ERROR: lambda s, rows: _error_text(s),
    Kind.TEXT: lambda s, rows: f"  ← {s.tool}{_badge(s)}: {_short(s.text)}\n",
    Kind.PENDING: lambda s, rows: _pending_text(s, rows),
    Kind.UNKNOWN: lambda s, rows: _pending_text(s, rows),
}


def _pending_text(found: Shown, rows: int) -> str:
    return format_pending(found.pending, rows) + "\n" if found.pending is not None else ""


class TextView:
    """Prints a thread, and a run as it streams, to ``out`` (stdout by default)."""

    def __init__(
        self,
        *,
        title: str = "",
        rows: int = 10,
        out: TextIO | None = None,
        tools: Mapping[str, Tool] | None = None,
        mark_numbers: bool = True,
    ) -> None:
        self.rows = rows
        #: False for an agent whose ``check_numbers`` is "off": a saved thread is not traced.
        self.mark_numbers = mark_numbers
        #: The agent's tools say each call in words and as code.
        self.calls = CallText(tools, agent=title)
        self.title = title
        self.out = out
        self.thread_id: str | None = None
        self._streaming = False
        self._lock = threading.Lock()

    def _write(self, text: str) -> None:
        stream = self.out or sys.stdout
        stream.write(inert(text))
        stream.flush()

    def show(self) -> None:
        """Print the agent's name as a heading."""
        if self.title:
            self._write(f"── {self.title} ──\n")

    def render(
        self,
        thread: Thread,
        *,
        history: bool = True,
        now: Collection[str] = (),
        numbers: Mapping[int, Sequence[TracedNumber]] | None = None,
    ) -> None:
        """Print ``thread``: its messages (unless ``history=False``), pending calls (those in
        ``now`` with their preview read again as the data is now), error. The numbers in no
        result are listed under their message (``numbers``: by ``id()`` of the message; else
        traced over the thread)."""
        self.thread_id = self.calls.thread_id = thread.id
        if history:
            if numbers is None:
                numbers = numbers_by_id(thread.messages) if self.mark_numbers else {}
            for m in thread.messages:
                self._message(m, numbers.get(id(m), ()))
        for p in thread.pending:
            self._write(format_pending(p, self.rows, now=p.call_id in now) + "\n")
        if thread.error:
            self._write(f"⚠ error: {thread.error}\n")
        if history:
            self._usage(thread.usage, None)

    def begin(self) -> None:
        """Nothing to print until the first event."""
        pass

    def on_event(self, event: RunEvent) -> None:
        """Print streamed text as it comes, then each message and approval asked for."""
        with self._lock:
            if isinstance(event, TextDelta):
                if not self._streaming:
                    self._write("assistant: ")
                    self._streaming = True
                self._write(event.text)
            elif isinstance(event, MessageAdded):
                self._message(event.message, event.numbers)
            elif isinstance(event, ApprovalRequested):
                for p in event.pending:
                    self._write(format_pending(p, self.rows) + "\n")

    def finish(self, result: RunResult | None, error: BaseException | None) -> None:
        """End the streamed line; print the token usage, or the error."""
        with self._lock:
            if self._streaming:
                self._write("\n")
                self._streaming = False
            if result is not None:
                self.thread_id = result.thread.id
                self._usage(result.thread.usage, result.usage)
            if error is not None and interruption(error) is None:
                self._write(f"⚠ error: {str(error) or type(error).__name__}\n")
            elif error is not None and not isinstance(error, RunInterrupted):
                self._write(f"{interruption(error)}\n")  # a stopped resume; a cell says it

    def mark_decided(
        self, call_ids: Collection[str], approve: bool | Resolution | str, note: str
    ) -> None:
        """Nothing to do: printed cards have no buttons to take away."""

    def _message(self, m: Message, numbers: Sequence[TracedNumber] = ()) -> None:
        if m.newer_parts:
            self._write(f"  ({_words.newer_parts(len(m.newer_parts), NEWER)})\n")
        if m.role == "user":
            self._write(f"you: {m.text}\n")
        elif m.role == "assistant":
            if self._streaming:
                self._write("\n")
                self._streaming = False
            elif m.text:
                self._write(f"assistant: {m.text}\n")
            missing = [n.text for n in numbers if n.rule is None]
            if missing:
                self._write(f"  ⚠ in no result: {', '.join(dict.fromkeys(missing))}\n")
            for call in m.tool_calls:
                self._write(f"  → {self.calls.words(call)}\n")
                code = self.calls.code(call)
                if code is not None:
                    self._write("".join(f"      {line}\n" for line in code.splitlines()))
        else:
            for r in m.tool_results:
                self._result(r)
            for note in m.interruptions:
                self._write(f"  ⏹ {note.text}\n")

    def _result(self, r: ToolResult) -> None:
        found = shown(r, rows=self.rows)
        self._write(RESULT_TEXT[found.kind](found, self.rows))

    def _usage(self, total: Usage, run: Usage | None) -> None:
        if total.requests or total.total_tokens:
            self._write(f"[thread {self.thread_id} · {_words.usage(total, run)}]\n")
