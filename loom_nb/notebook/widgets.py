"""The thread as ipywidgets: messages, collapsed tool calls, bounded tables, approval cards.

Events arrive on the private loop's thread (``loom_nb._loop_thread``). Streamed text is batched:
the assistant's message is re-sent at most once per ``interval`` seconds (leading and
trailing edge), so a long reply costs a handful of comm messages, not one per token.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable, Collection
from typing import Any

import ipywidgets as widgets

from loom_nb._agent import RunResult
from loom_nb._codec import is_dataframe
from loom_nb._events import ApprovalRequested, MessageAdded, RunEvent
from loom_nb._messages import Message, PendingApproval, Thread, ToolResult, Usage
from loom_nb.models import TextDelta
from loom_nb.notebook._html import (
    ERROR_STYLE,
    chart_html,
    esc,
    failed_html,
    frame_html,
    pre,
    rejected_html,
    to_json,
    user_html,
)
from loom_nb.notebook.cards import ApprovalCard
from loom_nb.notebook.history import history_html

#: Starts the resume of one decided call: (view, pending, approve) -> future.
Resumer = Callable[["ThreadView", PendingApproval, bool], "concurrent.futures.Future[Any]"]


def _md(text: str) -> dict[str, Any]:
    return {
        "output_type": "display_data",
        "metadata": {},
        "data": {"text/markdown": text, "text/plain": text},
    }


def _html(value: str, *classes: str) -> widgets.HTML:
    w = widgets.HTML(value)
    for c in classes:
        w.add_class(c)
    return w


class ThreadView(widgets.VBox):  # type: ignore[misc]
    """One thread, live. ``render`` draws a saved thread; ``on_event`` follows a run."""

    def __init__(
        self,
        *,
        agent_name: str = "",
        rows: int = 10,
        interval: float = 0.1,
        resumer: Resumer | None = None,
    ) -> None:
        self.agent_name = agent_name
        self.rows = rows
        self.interval = interval
        self.resumer = resumer
        self.thread_id: str | None = None
        self.cards: list[ApprovalCard] = []
        #: How often streamed text was sent to the frontend (one comm message each).
        self.stream_updates = 0
        self.future: concurrent.futures.Future[Any] | None = None
        self._details: dict[str, widgets.HTML] = {}
        self._stream: widgets.Output | None = None
        self._buffer: list[str] = []
        self._last_flush = 0.0
        self._flush_handle: asyncio.TimerHandle | None = None
        self._lock = threading.RLock()
        self.header = _html(f"<b>{esc(agent_name)}</b>", "loom-thread-header")
        self.body = widgets.VBox()
        self.running = _html("<i>the agent is working…</i>", "loom-running")
        self.running.layout.display = "none"
        self.errors = widgets.VBox()
        self.usage = _html("", "loom-usage")
        super().__init__([self.header, self.body, self.running, self.errors, self.usage])
        self.add_class("loom-thread")

    # ---- a saved thread ------------------------------------------------------------------

    def render(self, thread: Thread, *, history: bool = True) -> None:
        """Draw ``thread``: its messages (unless ``history=False``), pending cards, error."""
        with self._lock:
            self._set_thread(thread.id, thread.title)
            if history and thread.messages:
                self._append(_html(history_html(thread.messages, self.rows), "loom-history"))
            self._add_cards(thread.pending)
            if thread.error:
                self._error(thread.error)
            self._set_usage(thread.usage, None)

    # ---- a live run ----------------------------------------------------------------------

    def show(self) -> None:
        """Display the view in the cell's output."""
        from IPython.display import display

        display(self)  # type: ignore[no-untyped-call]

    def begin(self) -> None:
        """Show "the agent is working…"."""
        self.running.layout.display = None

    def on_event(self, event: RunEvent) -> None:
        """Follow the run: batched streamed text, messages, tool results, approval cards."""
        with self._lock:
            if isinstance(event, TextDelta):
                self._delta(event.text)
                return
            if event.thread_id and event.thread_id != self.thread_id:
                self._set_thread(event.thread_id)
            if isinstance(event, MessageAdded):
                self._add_message(event.message)
            elif isinstance(event, ApprovalRequested):
                self._add_cards(event.pending)

    def finish(self, result: RunResult | None, error: BaseException | None) -> None:
        """Stop the stream; show the thread's id and usage, settle the cards, show an error."""
        with self._lock:
            self._flush()
            self._stream = None
            self.running.layout.display = "none"
            if result is not None:
                self._set_thread(result.thread.id, result.thread.title)
                self._set_usage(result.thread.usage, result.usage)
                self._settle_cards(result)
            if error is not None:
                message = str(error) or type(error).__name__
                if isinstance(error, KeyboardInterrupt | concurrent.futures.CancelledError):
                    message = "The run was interrupted; what completed is saved."
                self._error(message)
                for card in self.cards:
                    if card.decision is not None and card.outcome is None:
                        card.set_outcome(f"the run failed: {message}", error=True)

    def mark_decided(self, call_ids: Collection[str], approve: bool, note: str) -> None:
        """Show on this view's cards that these calls were decided elsewhere."""
        for card in self.cards:
            if card.call_id in call_ids and card.decision is None:
                card.mark(approve, note)

    def wait(self, timeout: float | None = None) -> Any:
        """Block until the run started from this view (a click) ends; returns its result."""
        future = self.future
        return None if future is None else future.result(timeout)

    # ---- pieces --------------------------------------------------------------------------

    def _set_thread(self, thread_id: str, title: str | None = None) -> None:
        self.thread_id = thread_id
        for card in self.cards:
            card.thread_id = card.thread_id or thread_id
        about = f" · {esc(title)}" if title else ""
        self.header.value = (
            f"<b>{esc(self.agent_name)}</b>{about} "
            '<span style="color:#888;font-size:85%">thread '
            f'<code class="loom-thread-id">{esc(thread_id)}</code></span>'
        )

    def _append(self, *items: widgets.Widget) -> None:
        self.body.children = (*self.body.children, *items)

    def _add_message(self, message: Message) -> None:
        if message.role == "user":
            self._append(_html(user_html(message.text), "loom-message", "loom-user"))
        elif message.role == "assistant":
            self._assistant(message)
        else:
            for result in message.tool_results:
                self._add_result(result)

    def _assistant(self, message: Message) -> None:
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        stream, self._stream, self._buffer = self._stream, None, []
        if message.text:
            out = stream or self._new_text_widget()
            out.outputs = (_md(message.text),)
            self.stream_updates += stream is not None
        for call in message.tool_calls:
            args = to_json(call.arguments) if call.arguments is not None else call.raw_arguments
            details = widgets.HTML(pre(args or ""))
            self._details[call.id] = details
            box = widgets.Accordion(children=[details], titles=(f"tool call · {call.name}",))
            box.selected_index = None
            box.add_class("loom-tool-call")
            self._append(box)

    def _new_text_widget(self) -> widgets.Output:
        out = widgets.Output()
        out.add_class("loom-message")
        out.add_class("loom-assistant")
        self._append(out)
        return out

    def _add_result(self, result: ToolResult) -> None:
        details = self._details.get(result.call_id)
        badge = f" · {result.approval}" if result.approval else ""
        if details is not None:
            details.value += f"<div><b>result{badge}</b></div>" + pre(result.content[:4000])
        if is_dataframe(result.data):
            self._append(_html(frame_html(result.data, self.rows, result.name), "loom-frame"))
        elif result.chart is not None:
            self._append(_html(chart_html(result.chart), "loom-chart"))
        elif result.approval == "rejected":
            self._append(_html(rejected_html(result.name), "loom-rejected"))
        elif result.is_error:
            self._append(_html(failed_html(result.name, result.error or ""), "loom-error"))
        for card in self.cards:
            if card.call_id == result.call_id:
                if result.approval == "rejected":
                    card.set_outcome("nothing was written")
                elif result.is_error:
                    card.set_outcome(result.error or "", error=True)
                else:
                    card.set_outcome("done")

    def _add_cards(self, pending: list[PendingApproval]) -> None:
        for p in pending:
            card = ApprovalCard(
                p,
                thread_id=self.thread_id or "",
                rows=self.rows,
                decide=self._decide if self.resumer is not None else None,
            )
            self.cards.append(card)
            self._append(card)

    def _decide(self, card: ApprovalCard, approve: bool) -> concurrent.futures.Future[Any]:
        assert self.resumer is not None
        future = self.resumer(self, card.pending, approve)
        self.future = future
        return future

    def _settle_cards(self, result: RunResult) -> None:
        waiting = [p for p in result.thread.pending if p.decision is None]
        for card in self.cards:
            if card.decision is None or card.outcome is not None:
                continue
            if any(p.call_id == card.call_id for p in result.thread.pending):
                card.set_outcome(f"waiting for {len(waiting)} other decision(s)")

    def _error(self, message: str) -> None:
        self.errors.children = (
            *self.errors.children,
            _html(f'<div style="{ERROR_STYLE}">⚠ {esc(message)}</div>', "loom-error"),
        )

    def _set_usage(self, total: Usage, run: Usage | None) -> None:
        if not total.total_tokens:  # models that report no usage (test models, some servers)
            self.usage.value = ""
            return
        text = f"tokens: {total.input_tokens} in · {total.output_tokens} out"
        if run is not None and run.requests:
            text += f" (this run: {run.input_tokens} in · {run.output_tokens} out)"
        self.usage.value = f'<span style="color:#888;font-size:85%">{text}</span>'

    # ---- batched streaming ---------------------------------------------------------------

    def _delta(self, text: str) -> None:
        self._buffer.append(text)
        if self._stream is None:
            self._stream = self._new_text_widget()
        if self._flush_handle is not None:
            return
        wait = self._last_flush + self.interval - time.monotonic()
        if wait <= 0:
            self._flush()
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not on a loop: no timer to batch with
            self._flush()
            return
        self._flush_handle = loop.call_later(wait, self._timed_flush)

    def _timed_flush(self) -> None:
        with self._lock:
            self._flush_handle = None
            self._flush()

    def _flush(self) -> None:
        if self._stream is None or not self._buffer:
            return
        self._stream.outputs = (_md("".join(self._buffer) + " ▌"),)
        self.stream_updates += 1
        self._last_flush = time.monotonic()


class ChatWidget(widgets.VBox):  # type: ignore[misc]
    """An input box and the thread; Send runs the agent without blocking the kernel."""

    def __init__(self, view: ThreadView, send: Callable[[str], concurrent.futures.Future[Any]]):
        self.view = view
        self._send_fn = send
        self.input = widgets.Textarea(placeholder="Ask the agent… (Send)", rows=2)
        self.input.layout.width = "100%"
        self.input.add_class("loom-chat-input")
        self.send_button = widgets.Button(description="Send", button_style="primary")
        self.send_button.add_class("loom-send")
        self.send_button.on_click(lambda _b: self.ask())
        self.future: concurrent.futures.Future[Any] | None = None
        self._lock = threading.Lock()
        super().__init__([view, widgets.HBox([self.input, self.send_button])])
        self.add_class("loom-chat")

    def ask(self, text: str | None = None) -> concurrent.futures.Future[Any] | None:
        """Send ``text`` (or the input box's text). None when empty or a run is going on."""
        with self._lock:
            prompt = (self.input.value if text is None else text).strip()
            if not prompt or (self.future is not None and not self.future.done()):
                return None
            self.input.value = ""
            self.send_button.disabled = True
            future = self._send_fn(prompt)
            self.future = future
        future.add_done_callback(lambda _f: setattr(self.send_button, "disabled", False))
        return future

    def wait(self, timeout: float | None = None) -> Any:
        """Block until the last sent message's run ends (or its approval click's run)."""
        result = None if self.future is None else self.future.result(timeout)
        if self.view.future is not None:
            result = self.view.future.result(timeout)
        return result
