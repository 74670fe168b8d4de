"""Approval cards: what exactly will be written, with Approve / Reject buttons.

A click never blocks the kernel: it hands the decision to the private loop (``_loop_thread``) and
returns. Clicks may arrive on any thread (a JupyterLab subshell with ipykernel 7.3), so the
one-decision guard is a lock in code, not only disabled buttons.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from loom_nb._messages import PendingApproval
from loom_nb.notebook._html import WAITING_HTML, esc, preview_html

#: Called with (card, approve); starts the resume and returns its future.
DecideFn = Callable[["ApprovalCard", bool], "concurrent.futures.Future[Any] | None"]


class ApprovalCard(widgets.VBox):  # type: ignore[misc]
    """One pending call. ``approve()`` / ``reject()`` (or the buttons) decide it once."""

    def __init__(
        self,
        pending: PendingApproval,
        *,
        thread_id: str,
        rows: int = 10,
        decide: DecideFn | None = None,
    ) -> None:
        self.pending = pending
        self.thread_id = thread_id
        self.call_id = pending.call_id
        self.decision: bool | None = None
        self.outcome: str | None = None
        self.future: concurrent.futures.Future[Any] | None = None
        self._decide_fn = decide
        self._lock = threading.Lock()
        self.header = widgets.HTML(self._header("waits for your approval"))
        self.preview = widgets.HTML(preview_html(pending.preview, pending.arguments, rows))
        self.approve_button = widgets.Button(
            description="Approve", button_style="success", icon="check"
        )
        self.reject_button = widgets.Button(
            description="Reject", button_style="danger", icon="times"
        )
        self.approve_button.add_class("loom-approve")
        self.reject_button.add_class("loom-reject")
        self.decision_label = widgets.HTML("")
        self.decision_label.add_class("loom-decision")
        self.approve_button.on_click(lambda _b: self.approve())
        self.reject_button.on_click(lambda _b: self.reject())
        buttons = widgets.HBox([self.approve_button, self.reject_button])
        buttons.add_class("loom-buttons")
        # Shown by OFFLINE_STYLE instead of the buttons once the kernel is gone (a restart, a
        # saved notebook): the buttons could reach nobody.
        offline = widgets.HTML(f"<div>{WAITING_HTML}</div>")
        offline.add_class("loom-offline")
        super().__init__([self.header, self.preview, buttons, offline, self.decision_label])
        self.add_class("loom-approval")
        self.add_class("loom-undecided")
        self.layout.border = "1px solid #f0ad4e"
        self.layout.padding = "6px"
        self.layout.margin = "6px 0"
        if pending.decision is not None:  # decided earlier; waits for the other calls
            self.mark(pending.decision, "waiting for the other calls")

    def approve(self) -> concurrent.futures.Future[Any] | None:
        """Approve this call (like a click). Returns the resume's future, or None when the
        card was already decided."""
        return self._decide(True)

    def reject(self) -> concurrent.futures.Future[Any] | None:
        """Reject this call (like a click); nothing is written. Returns the resume's future, or
        None when the card was already decided."""
        return self._decide(False)

    def static_html(self) -> str:
        """The card without buttons, for where widgets are not drawn (a saved notebook, GitHub,
        nbviewer): what it asks and, once decided, what came of it."""
        if self.decision is None:
            state = "waits for your approval"
            last = f"<div>{WAITING_HTML}</div>"
        else:
            state = "approved" if self.decision else "rejected"
            last = self.decision_label.value
        return (
            f'<div class="loom-approval" style="border:1px solid #f0ad4e;padding:6px;'
            f'margin:6px 0">{self._header(state)}{self.preview.value}{last}</div>'
        )

    def _decide(self, approve: bool) -> concurrent.futures.Future[Any] | None:
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

    def mark(self, approve: bool, note: str) -> None:
        """Show a decision made elsewhere (a line magic, an earlier session)."""
        with self._lock:
            self.decision = approve
        self._disable()
        self._label(approve, note)

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
        self.remove_class("loom-undecided")

    def _header(self, state: str) -> str:
        return (
            f"<b>{esc(self.pending.tool)}</b> {state} "
            f'<span style="color:#888;font-size:85%">call {esc(self.call_id)}</span>'
        )

    def _label(self, approve: bool | None, note: str, *, error: bool = False) -> None:
        if approve is not None:  # the card stops asking once it is decided
            self.header.value = self._header("approved" if approve else "rejected")
            self.layout.border = "1px solid " + ("#2e7d32" if approve else "#9e9e9e")
        word = "✔ Approved" if approve else "✘ Rejected" if approve is False else "…"
        color = "#8b1a1a" if error else "#2e7d32" if approve else "#8b1a1a"
        self.decision_label.value = (
            f'<span style="color:{color}"><b>{word}</b> · {esc(note)}</span>'
        )
