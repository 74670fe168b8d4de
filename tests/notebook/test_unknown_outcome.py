"""A call whose kernel stopped while it ran, as the notebook shows it: the write may have
happened, so the card (and the text view) offer what the user can know, never Approve / Reject
as if nothing ran; nothing runs again until the user says "run it again"."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell

from loom_nb.notebook import session as loom_session


@pytest.fixture
def shell(stopped_write: Callable[..., InteractiveShell]) -> InteractiveShell:
    """Its kernel claimed the call and died while the tool ran (no lease: nobody runs the
    thread now)."""
    return stopped_write("running", holder="gone:1:x")


def run(sh: InteractiveShell, code: str) -> Any:
    return sh.run_cell(code, store_history=False)


def test_text_mode_offers_the_three_choices_and_runs_again_only_when_asked(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    call_id = shell.user_ns["call"]
    assert run(shell, "%loom approvals").success
    out = capsys.readouterr().out
    assert f"insert_ticket may have run: its outcome is unknown (call {call_id})" in out
    assert "  Subject: refund" in out  # the arguments it ran with, in words
    assert f"%loom resolve {call_id} retry" in out and "%loom approve" not in out
    refused = run(shell, f"%loom approve {call_id}")
    assert not refused.success
    assert f"%loom resolve {call_id} happened|retry|failed" in capsys.readouterr().err
    assert shell.user_ns["written"] == []
    assert run(shell, f"%loom resolve {call_id} retry").success
    out = capsys.readouterr().out
    assert shell.user_ns["written"] == ["refund"] and "Noted." in out


def test_the_card_says_it_may_have_run_and_offers_choices_not_approve_or_reject(
    shell: InteractiveShell,
) -> None:
    run(shell, "%config LoomMagics.display = 'widgets'")
    assert run(shell, "%loom show {thread_id}").success
    view: Any = loom_session(shell).last_view
    [card] = view.cards
    assert "may have run" in card.header.value and "may have happened" in card.preview.value
    [buttons] = [c for c in card.children if hasattr(c, "children")]
    assert [b.description for b in buttons.children] == [
        "It happened — continue",
        "It did not — run it again",
        "Tell the agent it failed",
    ]
    card.choice_buttons["happened"].click()
    done = view.wait(10)
    assert done.status == "complete" and done.output == "Noted."
    assert shell.user_ns["written"] == []  # "it happened": not run again
    assert "It happened" in card.decision_label.value
    assert all(b.disabled for b in card.choice_buttons.values())
    [result] = done.thread.tool_results()
    assert "it took effect" in result.content
