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
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import ipywidgets as widgets

from loom_nb import _words
from loom_nb._agent import RunResult
from loom_nb._ask import is_question
from loom_nb._events import ApprovalRequested, MessageAdded, RunEvent
from loom_nb._messages import (
    NEWER,
    Message,
    PendingApproval,
    Resolution,
    Thread,
    ToolCall,
    ToolResult,
    Usage,
)
from loom_nb._numbers import TracedNumber
from loom_nb._shown import shown
from loom_nb._tools import Tool
from loom_nb.models import TextDelta
from loom_nb.notebook._calls import CallText, body_html, summary
from loom_nb.notebook._html import ERROR_STYLE, esc, interrupted_html, markdown_html, user_html
from loom_nb.notebook._page import SafeHTML, style
from loom_nb.notebook._page import html as _html
from loom_nb.notebook._static import StaticOutputs, new_key, thread_html, thread_text
from loom_nb.notebook.cards import CHOICES, ApprovalCard
from loom_nb.notebook.history import RESULT_HTML, history_html, kind_class, numbers_by_id
from loom_nb.notebook.questions import QuestionCard
from loom_nb.notebook.session import RunInterrupted, interruption

#: Starts the resume of one decided call: (view, pending, approve or a Resolution) -> future.
Resumer = Callable[
    ["ThreadView", PendingApproval, "bool | Resolution | str"], "concurrent.futures.Future[Any]"
]
#: Makes the thread's rule "writes like this one" from a card: (view, pending) -> the rule.
Allower = Callable[["ThreadView", PendingApproval], Any]


class ThreadView(widgets.VBox):  # type: ignore[misc]
    """One thread, live. ``render`` draws a saved thread; ``on_event`` follows a run."""

    def __init__(
        self,
        *,
        agent_name: str = "",
        rows: int = 10,
        interval: float = 0.1,
        resumer: Resumer | None = None,
        tools: Mapping[str, Tool] | None = None,
        allower: Allower | None = None,
        mark_numbers: bool = True,
    ) -> None:
        self.agent_name = agent_name
        #: False for an agent whose ``check_numbers`` is "off": a saved thread is not traced
        #: (a run's events then carry no numbers either), so no view of it marks any.
        self.mark_numbers = mark_numbers
        self.rows = rows
        self.interval = interval
        self.resumer = resumer
        self.allower = allower
        self.thread_id: str | None = None
        self.cards: list[ApprovalCard | QuestionCard] = []
        #: How often streamed text was sent to the frontend (one comm message each).
        self.stream_updates = 0
        self.future: concurrent.futures.Future[Any] | None = None
        #: The agent's tools say each call in words and as code.
        self.calls = CallText(tools, agent=agent_name)
        #: Each call's accordion, with the call and its code, until its result arrives.
        self._calls: dict[str, tuple[widgets.Accordion, ToolCall, str | None]] = {}
        self._stream: SafeHTML | None = None
        self._buffer: list[str] = []
        self._last_flush = 0.0
        self._flush_handle: asyncio.TimerHandle | None = None
        self._lock = threading.RLock()
        # What the static form (``_static``) is drawn from: the messages shown, each card with
        # the number of messages before it, the error lines, a reply cut short.
        self._messages: list[Message] = []
        self._placed: list[tuple[int, ApprovalCard | QuestionCard]] = []
        self._errors: list[str] = []
        self._unfinished = ""
        self._title: str | None = None
        #: The traced numbers of each assistant message shown, by ``id()`` of the message
        #: (a run's come with its events, traced over the whole thread).
        self._numbers: dict[int, Sequence[TracedNumber]] = {}
        #: The static form's outputs (shown with the view), sent again as the thread changes.
        self.static = StaticOutputs(new_key())
        #: The question this view's run asked (its header shows it, not the thread's first).
        self._asked: str | None = None
        self.header = _html(self._header_html(), "loom-thread-header")
        self.body = widgets.VBox()
        self.running = _html(f"<i>{esc(_words.WORKING)}</i>", "loom-running")
        self.running.layout.display = "none"
        self.errors = widgets.VBox()
        self.usage = _html("", "loom-usage")
        super().__init__(
            [style(self.static.key), self.header, self.body, self.running, self.errors, self.usage]
        )
        self.add_class("loom-thread")

    # ---- a saved thread ------------------------------------------------------------------

    def render(self, thread: Thread, *, history: bool = True, now: Collection[str] = ()) -> None:
        """Draw ``thread``: its messages (unless ``history=False``), pending cards (those in
        ``now`` with their preview read again as the data is now), error."""
        with self._lock:
            self._set_thread(thread.id, thread.title)
            if history and thread.messages:
                numbers = numbers_by_id(thread.messages) if self.mark_numbers else {}
                self._numbers.update(numbers)
                drawn = history_html(thread.messages, self.rows, calls=self.calls, numbers=numbers)
                self._append(_html(drawn, "loom-history"))
                self._messages.extend(thread.messages)
            self._add_cards(thread.pending, now)
            if thread.error:
                self._error(f"⚠ {thread.error}")
            self._set_usage(thread.usage, None)
        self.refresh_static()

    # ---- the static form beside the widget -------------------------------------------------

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        return _widget_only(super()._repr_mimebundle_(**kwargs))

    def static_bundles(self) -> list[dict[str, Any]]:
        """The static form's outputs as they would be displayed now (see ``_static``)."""
        return self.static.bundles(self.static_html(), self.static_text())

    def show_static(self) -> None:
        """Display the static form (after the widget, or the chat holding this view)."""
        self.static.show(self.static_html(), self.static_text())

    def static_html(self) -> str:
        """The thread as HTML without buttons, for where the widget is not drawn."""
        with self._lock:
            return thread_html(
                self._header_html(static=True),
                self._messages,
                [(at, card.static_html()) for at, card in self._placed],
                self._errors,
                self.usage.value,
                self.rows,
                self._unfinished,
                self.calls,
                self._numbers,
            )

    def static_text(self) -> str:
        """The thread as text (``text/plain``), as terminal IPython prints it."""
        with self._lock:
            waiting = [c.pending for c in self.cards if c.decision is None]
            return thread_text(
                self.agent_name,
                self.thread_id,
                self._messages,
                waiting,
                self._errors,
                self.rows,
                self.calls.tools,
                {c.call_id for c in self.cards if getattr(c, "now", False)},
                self._numbers,
            )

    def refresh_static(self) -> None:
        """Send the static form again (a run ended, a card was decided), so the output saved
        with the notebook holds the thread as it is now."""
        self.static.refresh(self.static_html(), self.static_text())

    # ---- a live run ----------------------------------------------------------------------

    def show(self) -> None:
        """Display the view in the cell's output (the widget and its static form)."""
        from IPython.display import display

        display(self)  # type: ignore[no-untyped-call]
        self.show_static()

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
                if event.numbers:
                    self._numbers[id(event.message)] = event.numbers
                self._add_message(event.message)
            elif isinstance(event, ApprovalRequested):
                self._add_cards(event.pending)

    def finish(self, result: RunResult | None, error: BaseException | None) -> None:
        """Stop the stream; show the thread's id and usage, settle the cards, show an error."""
        with self._lock:
            self._flush()
            self._unfinished = "".join(self._buffer)  # a reply the run did not complete
            self._stream, self._buffer = None, []
            self.running.layout.display = "none"
            if result is not None:
                self._set_thread(result.thread.id, result.thread.title)
                self._set_usage(result.thread.usage, result.usage)
                self._settle_cards(result)
            if error is not None:
                stopped = interruption(error)
                message = stopped or str(error) or type(error).__name__
                if not isinstance(error, RunInterrupted):  # a cell's: its one line says it
                    self._error(stopped or f"⚠ {message}")
                for card in self.cards:
                    if card.decision is not None and card.outcome is None:
                        card.set_outcome(f"the run failed: {message}", error=True)
        self.refresh_static()

    def mark_decided(
        self, call_ids: Collection[str], approve: bool | Resolution | str, note: str
    ) -> None:
        """Show on this view's cards that these calls were decided elsewhere."""
        for card in self.cards:
            if card.call_id not in call_ids or card.decision is not None:
                continue
            if isinstance(card, QuestionCard):  # noqa: SIM114 (a question takes its answer's text)
                card.mark(approve, note)
            elif isinstance(approve, bool) or approve in CHOICES:
                card.mark(approve, note)
        self.refresh_static()

    def wait(self, timeout: float | None = None) -> Any:
        """Block until the run started from this view (a click) ends; returns its result."""
        future = self.future
        return None if future is None else future.result(timeout)

    # ---- pieces --------------------------------------------------------------------------

    def _set_thread(self, thread_id: str, title: str | None = None) -> None:
        self.thread_id = thread_id
        self.calls.thread_id = thread_id
        self._title = title or self._title
        for card in self.cards:
            card.thread_id = card.thread_id or thread_id
        self.header.value = self._header_html()

    def _header_html(self, *, static: bool = False) -> str:
        """The agent, the thread's title and id; the widget's also carries the line it shows
        once its kernel is gone (OFFLINE_STYLE, in the view's stylesheet)."""
        said = self._asked or self._title
        about = f" · {esc(_one_line(said))}" if said else ""
        tid = self.thread_id
        thread = (
            '<span style="color:#888;font-size:85%">thread '
            f'<code class="loom-thread-id">{esc(tid)}</code></span>'
            if tid
            else ""
        )
        head = f"<div><b>{esc(self.agent_name)}</b>{about} {thread}</div>"
        if static:
            return head
        gone = (
            '<span class="loom-gone" style="color:#888;font-size:85%"> · a saved view: the '
            "kernel that drew it is gone</span>"
        )
        return head.replace("</div>", gone + "</div>")

    def _append(self, *items: widgets.Widget) -> None:
        self.body.children = (*self.body.children, *items)

    def _add_message(self, message: Message) -> None:
        self._messages.append(message)
        if message.newer_parts:
            said = _words.newer_parts(len(message.newer_parts), NEWER)
            self._append(_html(esc(said), "loom-newer"))
        if message.role == "user":
            if self._asked is None:  # this cell's question: the header says it
                self._asked = message.text
                self.header.value = self._header_html()
            self._append(_html(user_html(message.text), "loom-message", "loom-user"))
        elif message.role == "assistant":
            self._assistant(message)
        else:
            for result in message.tool_results:
                self._add_result(result)
            for note in message.interruptions:
                self._append(_html(interrupted_html(note.text), "loom-interrupted"))

    def _assistant(self, message: Message) -> None:
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        stream, self._stream, self._buffer = self._stream, None, []
        if message.text:
            out = stream or self._new_text_widget()
            out.value = markdown_html(message.text, self._numbers.get(id(message), ()))
            self.stream_updates += stream is not None
        for call in message.tool_calls:
            code = self.calls.code(call)
            details = _html(body_html(call, code, None))
            box = widgets.Accordion(children=[details], titles=(self.calls.words(call),))
            box.selected_index = None
            box.add_class("loom-tool-call")
            self._calls[call.id] = (box, call, code)
            self._append(box)

    def _new_text_widget(self) -> SafeHTML:
        out = _html("", "loom-message", "loom-assistant")
        self._append(out)
        return out

    def _add_result(self, result: ToolResult) -> None:
        found = shown(result, rows=self.rows)
        drawn = self._calls.pop(result.call_id, None)
        if drawn is not None:
            box, call, code = drawn
            box.children[0].value = body_html(call, code, result)
            box.titles = (summary(self.calls.words(call), result),)
            box.add_class(kind_class(found).strip())
        block = RESULT_HTML[found.kind](found)
        if block:
            self._append(_html(block, f"loom-{found.kind.value}"))
        for card in self.cards:
            if card.call_id == result.call_id:
                card.settle(found)

    def _add_cards(self, pending: list[PendingApproval], now: Collection[str] = ()) -> None:
        for p in pending:
            card: ApprovalCard | QuestionCard
            if is_question(p) and p.state == "pending":
                card = QuestionCard(
                    p,
                    thread_id=self.thread_id or "",
                    decide=self._decide if self.resumer is not None else None,
                )
            else:
                card = ApprovalCard(
                    p,
                    thread_id=self.thread_id or "",
                    rows=self.rows,
                    decide=self._decide if self.resumer is not None else None,
                    others_waiting=any(
                        q.state in ("pending", "unknown") for q in pending if q.call_id != p.call_id
                    ),
                    now=p.call_id in now,
                    allow=self._allow if self.allower is not None else None,
                )
            self.cards.append(card)
            self._placed.append((len(self._messages), card))
            self._append(card)

    def _allow(self, card: ApprovalCard) -> Any:
        assert self.allower is not None
        return self.allower(self, card.pending)

    def _decide(
        self, card: ApprovalCard | QuestionCard, approve: bool | Resolution | str
    ) -> concurrent.futures.Future[Any]:
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
            elif isinstance(card, QuestionCard):  # its answer was the result: the run went on
                card.set_outcome("done")

    def _error(self, line: str) -> None:
        self._errors.append(line)
        self.errors.children = (
            *self.errors.children,
            _html(f'<div style="{ERROR_STYLE}">{esc(line)}</div>', "loom-error"),
        )

    def _set_usage(self, total: Usage, run: Usage | None) -> None:
        if not total.total_tokens:  # models that report no usage (test models, some servers)
            self.usage.value = ""
            return
        text = esc(_words.usage(total, run))
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
        self._stream.value = markdown_html("".join(self._buffer) + " ▌")
        self.stream_updates += 1
        self._last_flush = time.monotonic()


def _one_line(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class ChatWidget(widgets.VBox):  # type: ignore[misc]
    """An input box and the thread; Send runs the agent without blocking the kernel."""

    def __init__(self, view: ThreadView, send: Callable[[str], concurrent.futures.Future[Any]]):
        self.view = view
        self._send_fn = send
        # The page sends the text once, on change (blur, or Enter below), not per keystroke:
        # ipywidgets holds back a model's updates while one is in flight but sends a
        # button's click at once, so a click could overtake the last typed characters.
        self.input = widgets.Textarea(
            placeholder="Ask the agent… (Enter sends, Shift+Enter adds a line)",
            rows=2,
            continuous_update=False,
        )
        self.input.layout.width = "100%"
        self.input.add_class("loom-chat-input")
        self.send_button = widgets.Button(description="Send", button_style="primary")
        self.send_button.add_class("loom-send")
        self.send_button.on_click(lambda _b: self.ask())
        self.future: concurrent.futures.Future[Any] | None = None
        self._lock = threading.Lock()
        box = widgets.HBox([self.input, self.send_button])
        box.add_class("loom-chat-box")
        offline = _html(
            "<i>The kernel that ran this chat is gone: run <code>%loom "
            f"{esc(view.agent_name)}</code> again to chat.</i>",
            "loom-chat-offline",
        )
        super().__init__([view, box, offline])
        self.add_class("loom-chat")

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        return _widget_only(super()._repr_mimebundle_(**kwargs))

    def show(self) -> None:
        """Display the chat (the widget and its thread's static form), with Enter to send."""
        from IPython.display import display

        display(self)  # type: ignore[no-untyped-call]
        self.view.show_static()
        display(_ENTER_SENDS)  # type: ignore[no-untyped-call]

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


def _widget_only(bundle: dict[str, Any] | None) -> dict[str, Any] | None:
    """A widget's output: its view, and no text (the static form is an output of its own, which
    nbconvert draws; one beside the widget's mime type it would not)."""
    if bundle is not None:
        bundle["text/plain"] = ""
    return bundle


class _EnterSends:
    """A script for the page, displayed once per chat: in a chat's input box, Enter clicks
    Send and Shift+Enter adds a line. ipywidgets' Textarea sends no key events to the kernel,
    so the page does it; where scripts do not run (an untrusted notebook), Send still works."""

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        return {"application/javascript": ENTER_SENDS_JS, "text/plain": ""}


#: Listens on the page once (capture phase, before JupyterLab's own shortcuts).
ENTER_SENDS_JS = """
if (!window.__loomEnterSends) {
  window.__loomEnterSends = true;
  document.addEventListener("keydown", (event) => {
    const box = event.target;
    if (event.key !== "Enter" || event.shiftKey || event.isComposing || !box.closest) return;
    const input = box.closest(".loom-chat-input");
    const chat = input && input.closest(".loom-chat");
    const send = chat && chat.querySelector("button.loom-send");
    if (!send) return;
    event.preventDefault();
    event.stopPropagation();
    box.dispatchEvent(new Event("change", {bubbles: true}));  // the text reaches the kernel first
    if (!send.disabled) send.click();
  }, true);
  // A click on Send (where a click does not take focus from the box) syncs the text first.
  document.addEventListener("pointerdown", (event) => {
    const send = event.target.closest && event.target.closest("button.loom-send");
    const chat = send && send.closest(".loom-chat");
    const box = chat && chat.querySelector(".loom-chat-input textarea");
    if (box) box.dispatchEvent(new Event("change", {bubbles: true}));
  }, true);
}
"""

_ENTER_SENDS = _EnterSends()
