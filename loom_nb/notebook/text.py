"""The thread as plain text, for terminal IPython and scripts (same magics, no widgets)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Collection, Mapping
from typing import Any, TextIO

from loom_nb._agent import RunResult
from loom_nb._ask import choices_of, is_question
from loom_nb._codec import is_dataframe
from loom_nb._counts import counts_of, counts_text
from loom_nb._events import ApprovalRequested, MessageAdded, RunEvent
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
from loom_nb._tools import Tool
from loom_nb._user_errors import preview_key
from loom_nb.models import TextDelta
from loom_nb.notebook._calls import CallText
from loom_nb.notebook._html import (
    AFTER,
    NOTE,
    card_values,
    preview_note,
    records_frame,
    shape_text,
    to_json,
)
from loom_nb.notebook._tracebacks import traceback_text
from loom_nb.notebook.session import RunInterrupted, interruption


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def format_frame(df: Any, rows: int) -> str:
    """The frame's shape and its first ``rows`` rows, as text; "… N more rows" below."""
    shown = df.head(max(rows, 0))
    more = len(df) - len(shown)
    footer = f"\n… {more:,} more row{'s' if more != 1 else ''}" if more > 0 else ""
    found = counts_of(df)
    said = f" · {counts_text(found)}" if found is not None else ""
    return f"[DataFrame {shape_text(df)}{said}]\n{shown.to_string(max_cols=20)}{footer}"


def format_pending(p: PendingApproval, rows: int) -> str:
    """A call waiting for a decision, what it would write (or ran with), and how to decide."""
    if is_question(p) and p.state == "pending":
        lines = [f"? the agent asks (call {p.call_id}): {p.arguments.get('question', '')}"]
        choices = choices_of(p)
        if choices:
            lines.append("  choices: " + " | ".join(choices))
        lines.append(f"  answer: %loom answer {p.call_id} TEXT")
        return "\n".join(lines)
    if p.state == "unknown":
        lines = [
            f"⚠ {p.tool} may have run: its outcome is unknown (call {p.call_id}). Its run "
            "stopped while it ran (the kernel stopped, or was interrupted, or lost its store), "
            "before its result was saved. Check where it writes."
        ]
    elif p.state == "running":
        lines = [f"⏳ {p.tool} is running in another kernel (call {p.call_id})"]
    elif p.newer:
        return f"? {p.tool} is {p.state!r} (call {p.call_id}): {NEWER}"
    elif is_pause_call(p.call_id) and p.state == "pending":  # a budget / max_steps pause
        return (
            f"⏸ the run paused at its {p.tool} (call {p.call_id}): {p.preview}\n"
            f"  continue: %loom approve {p.call_id}   stop: %loom reject {p.call_id}"
        )
    else:
        lines = [f"✋ {p.tool} waits for approval (call {p.call_id})"]
    # what it was asked to write; for an unknown outcome, the exact arguments it ran with
    value = card_values(
        p.preview if p.preview is not None and p.state != "unknown" else p.arguments
    )
    note = preview_note(p.preview, NOTE)
    if note and p.state != "unknown":
        lines.append(f"  ℹ {note}")
    frame = records_frame(value)
    if frame is None and isinstance(value, dict):
        for key, item in value.items():
            if (key in (NOTE, AFTER) and p.preview is not None) or str(key).startswith("_"):
                continue
            sub = records_frame(item)
            lines.append(f"  {key}:")
            text = format_frame(sub, rows) if sub is not None else to_json(item)
            lines.extend("    " + line for line in text.splitlines())
    else:
        text = format_frame(frame, rows) if frame is not None else to_json(value)
        lines.extend("  " + line for line in text.splitlines())
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
            f"  {p.state}, not run yet: once no other call of this turn waits, "
            f"%loom {word} {p.call_id} goes on"
        )
    return "\n".join(lines)


class TextView:
    """Prints a thread, and a run as it streams, to ``out`` (stdout by default)."""

    def __init__(
        self,
        *,
        title: str = "",
        rows: int = 10,
        out: TextIO | None = None,
        tools: Mapping[str, Tool] | None = None,
    ) -> None:
        self.rows = rows
        #: The agent's tools say each call in words and as code.
        self.calls = CallText(tools, agent=title)
        self.title = title
        self.out = out
        self.thread_id: str | None = None
        self._streaming = False
        self._lock = threading.Lock()

    def _write(self, text: str) -> None:
        stream = self.out or sys.stdout
        stream.write(text)
        stream.flush()

    def show(self) -> None:
        """Print the agent's name as a heading."""
        if self.title:
            self._write(f"── {self.title} ──\n")

    def render(self, thread: Thread, *, history: bool = True) -> None:
        """Print ``thread``: its messages (unless ``history=False``), pending calls, error."""
        self.thread_id = self.calls.thread_id = thread.id
        if history:
            for m in thread.messages:
                self._message(m)
        for p in thread.pending:
            self._write(format_pending(p, self.rows) + "\n")
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
                self._message(event.message)
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

    def _message(self, m: Message) -> None:
        if m.newer_parts:
            self._write(f"  ({len(m.newer_parts)} part(s) {NEWER})\n")
        if m.role == "user":
            self._write(f"you: {m.text}\n")
        elif m.role == "assistant":
            if self._streaming:
                self._write("\n")
                self._streaming = False
            elif m.text:
                self._write(f"assistant: {m.text}\n")
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
        badge = f" [{r.approval}{f' {r.rule}' if r.rule else ''}]" if r.approval else ""
        if r.approval == "rejected":
            self._write(f"  ✘ {r.name} rejected: nothing was run or written.\n")
        elif r.is_error:
            self._write(f"  ⚠ {r.name}{badge} failed: {_short(r.error or '')}\n")
            where = traceback_text(r.call_id)  # the user's code, if it raised in this kernel
            if where:
                self._write("".join(f"      {line}\n" for line in where.splitlines()))
        elif r.chart is not None:
            from loom_nb.charts import Chart

            self._write(f"  ← {r.name}{badge}: [chart: {Chart(r.chart).caption}]\n")
        elif is_dataframe(r.data):
            text = format_frame(r.data, self.rows)
            self._write(
                f"  ← {r.name}{badge}:\n" + "".join(f"    {line}\n" for line in text.splitlines())
            )
        else:
            self._write(f"  ← {r.name}{badge}: {_short(r.content)}\n")

    def _usage(self, total: Usage, run: Usage | None) -> None:
        if total.requests or total.total_tokens:
            text = f"thread: {total.line()}"
            if run is not None and run.requests:
                text += f" (this run: {run.line()})"
            self._write(f"[thread {self.thread_id} · {text}]\n")
