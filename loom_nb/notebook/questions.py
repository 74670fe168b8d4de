"""A question the agent asks (``ask_user``) as a card: the question, one button per choice or
a text box, answered once. It waits like an approval card (the run has stopped; the answer
resumes it) and is drawn with the same classes, so a card whose kernel is gone says how to
answer instead of showing buttons. The question and the choices are the model's text: escaped
into the card, and a button's label is text, never HTML."""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from loom_nb._ask import choices_of
from loom_nb._messages import PendingApproval
from loom_nb._shown import Kind, Shown
from loom_nb.notebook._html import esc
from loom_nb.notebook._page import html

#: Called with (card, the answer's text); starts the resume, returns its future.
AnswerFn = Callable[["QuestionCard", Any], "concurrent.futures.Future[Any] | None"]


def offline_html(call_id: str) -> str:
    return f"waiting for your answer — run <code>%loom answer {esc(call_id)} TEXT</code>"


class QuestionCard(widgets.VBox):  # type: ignore[misc]
    """One question. ``answer(text)`` (or a button, or the text box) answers it once."""

    def __init__(
        self, pending: PendingApproval, *, thread_id: str, decide: AnswerFn | None = None
    ) -> None:
        self.pending = pending
        self.thread_id = thread_id
        self.call_id = pending.call_id
        self.decision: Any = None
        self.outcome: str | None = None
        self.future: concurrent.futures.Future[Any] | None = None
        self._decide_fn = decide
        self._lock = threading.Lock()
        self.header = html(self._header("asks you"))
        question = str(pending.arguments.get("question", ""))
        self.question = html(f'<div class="loom-question-text">{esc(question)}</div>')
        self.choices = choices_of(pending) or []
        #: One button per choice (their labels are text, as ipywidgets draws them).
        self.choice_buttons: list[widgets.Button] = []
        for choice in self.choices:
            button = widgets.Button(description=choice, layout=widgets.Layout(width="auto"))
            button.add_class("loom-choice")
            button.on_click(lambda _b, c=choice: self.answer(c))
            self.choice_buttons.append(button)
        self.text: widgets.Text | None = None
        self.send_button: widgets.Button | None = None
        shown: list[widgets.Widget] = list(self.choice_buttons)
        if not self.choices:
            self.text = widgets.Text(placeholder="your answer")
            self.send_button = widgets.Button(description="Answer", button_style="success")
            self.send_button.add_class("loom-answer")
            self.send_button.on_click(lambda _b: self.answer(self.text.value if self.text else ""))
            shown = [self.text, self.send_button]
        buttons = widgets.HBox(shown)
        buttons.add_class("loom-buttons")
        offline = html(f"<div>{offline_html(self.call_id)}</div>", "loom-offline")
        self.decision_label = html("", "loom-decision")
        super().__init__([self.header, self.question, buttons, offline, self.decision_label])
        self.add_class("loom-approval")
        self.add_class("loom-question")
        self.add_class("loom-undecided")
        self.layout.border = "1px solid #1e88e5"
        self.layout.padding = "6px"
        self.layout.margin = "6px 0"

    def offers(self) -> list[str]:
        """The choices it offers now (``["text"]`` for a free answer); [] once answered."""
        if self.decision is not None:
            return []
        return list(self.choices) if self.choices else ["text"]

    def answer(self, text: str) -> concurrent.futures.Future[Any] | None:
        """Answer the question (like a click). Returns the resume's future, or None when it was
        answered already (or the answer is empty: the card waits for one)."""
        if not str(text).strip():
            self.decision_label.value = esc("write an answer first")
            return None
        with self._lock:
            if self.decision is not None:
                return None
            self.decision = text
        self._disable()
        self._label(text, "resuming…")
        if self._decide_fn is None:
            self._label(text, "no agent attached to this card; use %loom answer")
            return None
        try:
            self.future = self._decide_fn(self, text)
        except Exception as exc:
            self.set_outcome(str(exc), error=True)
            return None
        return self.future

    def mark(self, answer: Any, note: str) -> None:
        """Show an answer given elsewhere (a line magic, another kernel)."""
        with self._lock:
            self.decision = answer
        self._disable()
        self._label(answer, note)

    def settle(self, found: Shown) -> None:
        """Say what came of the answer from the call's result (the run went on with it)."""
        if found.kind is Kind.ERROR:
            self.set_outcome(found.text, error=True)
        else:
            self.set_outcome("done")

    def set_outcome(self, text: str, *, error: bool = False) -> None:
        """Say what came of the answer (the run went on, or its error)."""
        self.outcome = text
        if error:
            self.decision_label.add_class("loom-error")
        self._label(self.decision, "answered" if text == "done" else text, error=error)

    def wait(self, timeout: float | None = None) -> Any:
        """Block until the resumed run ends; returns its RunResult (re-raises its error)."""
        if self.future is None:
            return None
        return self.future.result(timeout)

    def static_html(self) -> str:
        """The card without buttons, for where widgets are not drawn."""
        if self.decision is None:  # it may be answered later: the saved copy cannot know
            saved = "unanswered when this output was saved. Answered after? See "
            saved += "<code>%loom show</code>."
            state, last = "asks you", f"<div>{saved}</div><div>{offline_html(self.call_id)}</div>"
        else:
            state, last = "was answered", self.decision_label.value
        choices = "".join(f"<li>{esc(c)}</li>" for c in self.choices)
        listed = f"<ul>{choices}</ul>" if choices else ""
        return (
            f'<div class="loom-approval loom-question" style="border:1px solid #1e88e5;'
            f'padding:6px;margin:6px 0">{self._header(state)}{self.question.value}{listed}'
            f"{last}</div>"
        )

    def _disable(self) -> None:
        for button in self.choice_buttons:
            button.disabled = True
        if self.text is not None and self.send_button is not None:
            self.text.disabled = True
            self.send_button.disabled = True
        self.remove_class("loom-undecided")

    def _header(self, state: str) -> str:
        # the call's id is the card's title (a tooltip), not part of the sentence
        return f'<span title="{esc(self.call_id)}"><b>The agent</b> {esc(state)}</span>'

    def _label(self, answer: Any, note: str, *, error: bool = False) -> None:
        if answer is False:
            said = "✘ Declined"
        elif answer is None:
            said = "…"
        else:
            said = f"✔ {answer}"
        if answer is not None:
            self.header.value = self._header("was answered")
        color = "#8b1a1a" if error else "#2e7d32"
        self.decision_label.value = (
            f'<span style="color:{color}"><b>{esc(str(said))}</b> · {esc(note)}</span>'
        )
