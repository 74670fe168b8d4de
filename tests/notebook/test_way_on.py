"""A call decided but never run (its kernel stopped between Approve or Reject and the run that
takes the call), as the notebook shows it after a restart: the card offers Continue, the text
view and every refusal name `%loom approve` / `%loom reject`, and going on runs it once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell

from loom_nb.notebook import session as loom_session


@pytest.fixture(params=["approved", "rejected"])
def shell(
    request: pytest.FixtureRequest, stopped_write: Callable[..., InteractiveShell]
) -> InteractiveShell:
    """Decided in a kernel that stopped before its run took the call: nothing runs the
    thread."""
    return stopped_write(request.param)


def run(sh: InteractiveShell, code: str) -> Any:
    return sh.run_cell(code, store_history=False)


def test_text_mode_names_the_way_on_and_the_command_goes_on(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    call_id, state = shell.user_ns["call"], shell.user_ns["state"]
    word = "approve" if state == "approved" else "reject"
    assert run(shell, "%loom approvals").success
    out = capsys.readouterr().out
    assert f"{state}, not run yet" in out and f"%loom {word} {call_id} goes on" in out
    refused = run(shell, "%%loom support --thread {thread_id}\nsomething else")
    assert not refused.success
    err = capsys.readouterr().err
    assert f"%loom {word} {call_id}" in err and "approve or reject first" not in err
    other = "reject" if word == "approve" else "approve"
    assert not run(shell, f"%loom {other} {call_id}").success
    assert f"%loom {word} {call_id}" in capsys.readouterr().err
    assert shell.user_ns["written"] == []
    assert run(shell, f"%loom {word} {call_id}").success
    assert "Noted." in capsys.readouterr().out
    assert shell.user_ns["written"] == (["refund"] if state == "approved" else [])
    assert shell.user_ns["support"].thread(shell.user_ns["thread_id"]).status == "complete"


def test_the_card_offers_continue_and_it_goes_on_once(shell: InteractiveShell) -> None:
    state = shell.user_ns["state"]
    run(shell, "%config LoomMagics.display = 'widgets'")
    assert run(shell, "%loom show {thread_id}").success
    view: Any = loom_session(shell).last_view
    [card] = view.cards
    assert card.offers() == ["continue"] and f"{state}, not run yet" in card.header.value
    assert card.continue_button is not None
    card.continue_button.click()
    done = view.wait(10)
    assert done.status == "complete" and done.output == "Noted."
    assert card.offers() == []
    card.continue_button.click()  # a second click does nothing
    assert shell.user_ns["written"] == (["refund"] if state == "approved" else [])
