"""Approval cards: what exactly will be written, with Approve / Reject buttons.

A click never blocks the kernel: it hands the decision to the private loop (``_loop_thread``) and
returns. Clicks may arrive on any thread (a JupyterLab subshell with ipykernel 7.3), so the
one-decision guard is a lock in code, not only disabled buttons.

A call whose outcome is unknown (its kernel stopped while it ran) is shown as such: the write
may have happened, so the card offers what the user can know, not Approve / Reject.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from loom_nb import _words
from loom_nb._messages import NEWER, PendingApproval, Resolution, is_pause_call
from loom_nb._shown import Kind, Shown
from loom_nb._user_errors import preview_key
from loom_nb.notebook._html import (
    AFTER,
    NOTE_STYLE,
    SAVED_HTML,
    WAITING_HTML,
    esc,
    preview_html,
    preview_note,
    traceback_html,
)
from loom_nb.notebook._page import html
from loom_nb.notebook._tracebacks import traceback_text

#: Called with (card, True / False, or a Resolution); starts the resume, returns its future.
DecideFn = Callable[["ApprovalCard", "bool | Resolution"], "concurrent.futures.Future[Any] | None"]

#: The choices for a call whose outcome is unknown: (button text, what the label says after).
CHOICES: dict[Resolution, tuple[str, str]] = {
    "happened": ("It happened — continue", "✔ It happened"),
    "retry": ("It did not — run it again", "↻ Run again"),
    "failed": ("Tell the agent it failed", "✘ Failed"),
}

UNKNOWN_NOTE = esc(_words.UNKNOWN_WHY).replace("may have happened", "<b>may have happened</b>")
#: What a resumed card says above rows it read again when it was drawn.
NOW_NOTE = f'<div class="loom-now" style="{NOTE_STYLE}">ℹ {esc(_words.ROWS_NOW)}</div>'


class ApprovalCard(widgets.VBox):  # type: ignore[misc]
    """One pending call. ``approve()`` / ``reject()`` (or the buttons) decide it once."""

    def __init__(
        self,
        pending: PendingApproval,
        *,
        thread_id: str,
        rows: int = 10,
        decide: DecideFn | None = None,
        others_waiting: bool = True,
        allow: Callable[[ApprovalCard], Any] | None = None,
        now: bool = False,
    ) -> None:
        self.pending = pending
        self.thread_id = thread_id
        self.call_id = pending.call_id
        self.decision: bool | Resolution | None = None
        self.outcome: str | None = None
        self.future: concurrent.futures.Future[Any] | None = None
        self._decide_fn = decide
        self._lock = threading.Lock()
        self.header = html(self._header(_words.WAITS))
        #: The preview was read again when this card was drawn (a resumed thread).
        self.now = now
        drawn = preview_html(pending.preview, pending.arguments, rows)
        where = traceback_text(preview_key(pending.call_id))  # a preview that raised here
        self.preview = html((NOW_NOTE if now else "") + drawn + traceback_html(where))
        self.approve_button = widgets.Button(
            description="Approve", button_style="success", icon="check"
        )
        self.reject_button = widgets.Button(
            description="Reject", button_style="danger", icon="times"
        )
        self.approve_button.add_class("loom-approve")
        self.reject_button.add_class("loom-reject")
        self.decision_label = html("", "loom-decision")
        self.approve_button.on_click(lambda _b: self.approve())
        self.reject_button.on_click(lambda _b: self.reject())
        #: For a call whose outcome is unknown: one button per Resolution.
        self.choice_buttons: dict[Resolution, widgets.Button] = {}
        shown = [self.approve_button, self.reject_button]
        #: "Allow writes like this": a rule for this thread from this card's effect (its tool,
        #: table, columns and row count), then Approve.
        self.allow_button: widgets.Button | None = None
        self._allow_fn = allow
        if allow is not None and pending.state == "pending" and not is_pause_call(pending.call_id):
            self.allow_button = widgets.Button(
                description="Allow writes like this", layout=widgets.Layout(width="auto")
            )
            self.allow_button.add_class("loom-allow")
            self.allow_button.on_click(lambda _b: self.allow())
            shown.append(self.allow_button)
        if is_pause_call(pending.call_id):  # a budget / max_steps pause: the card says it all
            self.header.value = self._header("paused the run")
            self.preview.value = f"<div>{esc(str(pending.preview))}</div>"
            self.approve_button.description = "Continue"
            self.reject_button.description = "Stop"
        if pending.state == "unknown":
            self.header.value = self._header(_words.UNKNOWN, mark="⚠ ")
            self.preview.value = f"<div>{UNKNOWN_NOTE}</div>" + self.preview.value
            for choice, (text, _) in CHOICES.items():
                button = widgets.Button(description=text, layout=widgets.Layout(width="auto"))
                button.add_class(f"loom-{choice}")
                button.on_click(lambda _b, c=choice: self.resolve(c))
                self.choice_buttons[choice] = button
            shown = list(self.choice_buttons.values())
        elif pending.state == "running":  # another live kernel runs it now
            self.header.value = self._header(_words.RUNNING_ELSEWHERE)
            shown = []
        elif pending.newer:  # kept as it is; only that version moves it on
            self.header.value = self._header(f"is {pending.state}: {NEWER}")
            shown = []
        #: Decided, not run, nothing else waits (its kernel stopped first): Continue runs it.
        self.continue_button: widgets.Button | None = None
        stranded = pending.state in ("approved", "rejected") and not others_waiting
        if stranded:
            approved = pending.state == "approved"
            self.continue_button = widgets.Button(
                description="Continue — run it" if approved else "Continue",
                layout=widgets.Layout(width="auto"),
            )
            self.continue_button.add_class("loom-continue")
            self.continue_button.on_click(lambda _b: self._decide(approved))
            self.header.value = self._header(_words.not_run_yet(pending.state))
            shown = [self.continue_button]
        buttons = widgets.HBox(shown)
        buttons.add_class("loom-buttons")
        # Shown by OFFLINE_STYLE instead of the buttons once the kernel is gone (a restart, a
        # saved notebook): the buttons could reach nobody.
        offline = html(f"<div>{WAITING_HTML}</div>", "loom-offline")
        super().__init__([self.header, self.preview, buttons, offline, self.decision_label])
        self.add_class("loom-approval")
        self.add_class("loom-undecided")
        self.layout.border = "1px solid " + ("#d32f2f" if pending.state == "unknown" else "#f0ad4e")
        self.layout.padding = "6px"
        self.layout.margin = "6px 0"
        if stranded:
            self.decision_label.value = esc(
                "its kernel stopped before it ran: Continue "
                + ("runs it" if pending.state == "approved" else "tells the agent it was rejected")
            )
        elif pending.state in ("approved", "rejected"):  # decided earlier; waits for the others
            by = f"by rule {pending.rule}; " if pending.rule else ""
            self.mark(pending.state == "approved", f"{by}waiting for the other calls")
        elif pending.state == "running":
            self._disable()
            self.decision_label.value = "reload the thread when that run ends (%loom show ID)"
        elif pending.newer:
            self._disable()

    def offers(self) -> list[str]:
        """What the card offers now: "approve", "reject", "continue", or the choices for an
        unknown outcome ("happened", "retry", "failed"); [] once decided, or while the call
        runs in another kernel."""
        buttons: list[tuple[str, Any]] = [
            ("approve", self.approve_button),
            ("reject", self.reject_button),
            ("continue", self.continue_button),
            ("allow", self.allow_button),
            *self.choice_buttons.items(),
        ]
        shown = self.children[2].children
        return [name for name, b in buttons if b is not None and b in shown and not b.disabled]

    def approve(self) -> concurrent.futures.Future[Any] | None:
        """Approve this call (like a click). Returns the resume's future, or None when the
        card was already decided."""
        return self._decide(True)

    def allow(self) -> concurrent.futures.Future[Any] | None:
        """Make the thread's rule for writes like this one (see ``agent.allow``), then approve
        this call. Returns the resume's future, or None when the rule could not be made (the
        card says why) or the card was decided already."""
        if self._allow_fn is None or self.decision is not None:
            return None
        try:
            rule = self._allow_fn(self)
        except Exception as exc:
            self.decision_label.value = esc(f"no rule made: {exc}")
            return None
        future = self._decide(True)
        self.decision_label.value += esc(f" · rule {rule.id}: {rule.describe()}")
        return future

    def reject(self) -> concurrent.futures.Future[Any] | None:
        """Reject this call (like a click); nothing is written. Returns the resume's future, or
        None when the card was already decided."""
        return self._decide(False)

    def resolve(self, choice: Resolution) -> concurrent.futures.Future[Any] | None:
        """For a call whose outcome is unknown: "happened", "retry" or "failed" (like its
        buttons)."""
        return self._decide(choice)

    def static_html(self) -> str:
        """The card without buttons, for where widgets are not drawn (a saved notebook, GitHub,
        nbviewer): what it asks and, once decided, what came of it."""
        if self.decision is None:
            state = {
                "unknown": _words.UNKNOWN,
                "running": _words.RUNNING_ELSEWHERE,
            }.get(self.pending.state, _words.WAITS)
            last = f"<div>{SAVED_HTML}</div>"
        elif isinstance(self.decision, bool):
            state = "approved" if self.decision else "rejected"
            last = self.decision_label.value
        else:
            state = f"resolved: {self.decision}"
            last = self.decision_label.value
        return (
            f'<div class="loom-approval" style="border:1px solid #f0ad4e;padding:6px;'
            f'margin:6px 0">{self._header(state)}{self.preview.value}{last}</div>'
        )

    def _decide(self, approve: bool | Resolution) -> concurrent.futures.Future[Any] | None:
        with self._lock:
            if self.decision is not None:
                return None
            self.decision = approve
        self._disable()
        self._label(approve, "resuming…")
        if self._decide_fn is None:
            self._label(approve, "no agent attached to this card; use %loom approve/reject")
            return None
        try:
            self.future = self._decide_fn(self, approve)
        except Exception as exc:
            self.set_outcome(str(exc), error=True)
            return None
        return self.future

    def mark(self, approve: bool | Resolution, note: str) -> None:
        """Show a decision made elsewhere (a line magic, an earlier session)."""
        with self._lock:
            self.decision = approve
        self._disable()
        self._label(approve, note)

    def settle(self, found: Shown) -> None:
        """Say what came of the decision from the call's result, as :func:`~loom_nb._shown.shown`
        classified it: nothing done (rejected), its error, or done (and the preview's ``after``)."""
        if found.kind is Kind.REJECTED:
            self.set_outcome(_words.NOTHING_DONE)
        elif found.kind is Kind.ERROR:
            self.set_outcome(found.text, error=True)
        else:
            after = preview_note(self.pending.preview, AFTER)
            self.set_outcome(f"done: {after}" if after else "done")

    def set_outcome(self, text: str, *, error: bool = False) -> None:
        """Say what came of the decision (done, nothing written, the error)."""
        self.outcome = text
        if error:
            self.decision_label.add_class("loom-error")
        self._label(self.decision, text, error=error)

    def wait(self, timeout: float | None = None) -> Any:
        """Block until the resumed run ends; returns its RunResult (re-raises its error)."""
        if self.future is None:
            return None
        return self.future.result(timeout)

    def _disable(self) -> None:
        self.approve_button.disabled = True
        self.reject_button.disabled = True
        for button in self.choice_buttons.values():
            button.disabled = True
        if self.continue_button is not None:
            self.continue_button.disabled = True
        if self.allow_button is not None:
            self.allow_button.disabled = True
        self.remove_class("loom-undecided")

    def _header(self, state: str, *, mark: str = "") -> str:
        # the call's id is the card's title (a tooltip), not part of the sentence
        tool, call = esc(self.pending.tool), esc(self.call_id)
        return f'<span title="{call}">{mark}<b>{tool}</b> {esc(state)}</span>'

    def _label(self, approve: bool | Resolution | None, note: str, *, error: bool = False) -> None:
        if isinstance(approve, str):  # the user's choice for a call whose outcome was unknown
            word = CHOICES[approve][1]
            self.header.value = self._header(f"outcome was unknown · {word[2:].lower()}")
        else:
            if approve is not None:  # the card stops asking once it is decided
                self.header.value = self._header("approved" if approve else "rejected")
                self.layout.border = "1px solid " + ("#2e7d32" if approve else "#9e9e9e")
            word = "✔ Approved" if approve else "✘ Rejected" if approve is False else "…"
        color = "#8b1a1a" if error else "#2e7d32" if approve else "#8b1a1a"
        self.decision_label.value = (
            f'<span style="color:{color}"><b>{word}</b> · {esc(note)}</span>'
        )
