"""What a data person meets in a notebook (issue 16), through a real IPython shell in-process:
views carry a static form beside the widget, re-run cells and Ctrl-C keep the thread,
interpolation says what it left alone, setup errors are one line, frame writes say where the
change lives."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from typing import Any

import pandas as pd
import pytest
from IPython.core.interactiveshell import InteractiveShell

from loom_nb import FunctionModel, ReplayModel, Reply, define_agent, memory_store
from loom_nb.frames import frame_tools
from loom_nb.notebook import session as loom_session
from loom_nb.notebook.session import RunInterrupted
from loom_nb.notebook.widgets import ENTER_SENDS_JS

WIDGET = "application/vnd.jupyter.widget-view+json"


def cell(sh: InteractiveShell, line: str, body: str | None = None) -> Any:
    return sh.run_cell(line if body is None else f"{line}\n{body}", store_history=False)


# ---- the static form beside the widget -------------------------------------------------------


def _static(view: Any) -> tuple[str, str]:
    """The static outputs of ``view``: their HTML joined, and the thread's text."""
    bundles = view.static_bundles()
    return "".join(b.get("text/html", "") for b in bundles), bundles[0]["text/plain"]


def test_a_view_displays_the_widget_with_its_thread_as_html_and_text(
    shell: InteractiveShell,
) -> None:
    cell(shell, "%config LoomMagics.display = 'widgets'")
    shell.user_ns["model"].add(
        Reply("Looking.", [("orders", {"min_total": 100})]),
        Reply("Filing it.", [("insert_ticket", {"subject": "late orders"})]),
        "Filed.",
    )
    assert cell(shell, "%%loom analyst", "Which orders are above 100?").success
    view: Any = loom_session(shell).last_view
    bundle = view._repr_mimebundle_()
    assert bundle[WIDGET]["model_id"] == view.model_id
    assert "text/html" not in bundle and bundle["text/plain"] == ""  # the static form is apart
    html, text = _static(view)
    # The thread readable without widgets: the question, the table, the pending card's rows.
    assert "Which orders are above 100?" in html and re.search(r"\n1 +2 +150\.0", html)
    assert "late orders" in html and "insert_ticket</b> waits for your approval" in html
    assert "undecided when this output was saved. Decided after this output was saved?" in html
    assert "waiting for approval" not in html
    assert "<button" not in html and "ThreadView(" not in text
    assert "you: Which orders are above 100?" in text
    assert "✋ insert_ticket waits for your approval" in text and "%loom approve call_" in text
    # The widget's own card says the same once its kernel is gone (CSS on ipywidgets' class).
    card = view.cards[0]
    offline = [w for w in card.children if "loom-offline" in w._dom_classes]
    assert offline and "%loom approvals" in offline[0].value
    assert "loom-undecided" in card._dom_classes
    [sheet] = [w for w in view.children if "loom-style" in w._dom_classes]
    assert ".jupyter-widgets-disconnected" in sheet.value

    card.approve()
    view.wait(10)
    html, _ = _static(view)
    assert "insert_ticket</b> approved" in html and "done" in html and "Filed." in html
    assert "waiting for approval" not in html and "loom-undecided" not in card._dom_classes


def test_a_card_decided_after_its_output_says_so_once_the_thread_is_shown_again(
    shell: InteractiveShell,
) -> None:
    """Decided outside its view (here the agent's own API, as another kernel would), the
    earlier card reads as waiting until ``%loom show`` draws the thread: then it, and its
    static form, say it was decided after that output was saved."""
    cell(shell, "%config LoomMagics.display = 'widgets'")
    shell.user_ns["model"].add(
        Reply("Filing it.", [("insert_ticket", {"subject": "late orders"})]), "Filed."
    )
    assert cell(shell, "%%loom analyst", "File a ticket.").success
    view: Any = loom_session(shell).last_view
    [card] = view.cards
    before, _ = _static(view)
    assert "undecided when this output was saved" in before
    agent = shell.user_ns["analyst"]
    agent.resume_sync(view.thread_id, {card.call_id: True})
    assert shell.user_ns["written"] == ["late orders"]
    assert cell(shell, f"%loom show {view.thread_id}").success
    after, _ = _static(view)
    assert "decided after this output was saved: see %loom show" in after
    assert "insert_ticket</b> approved" in after and "undecided" not in after
    assert card.offers() == []  # its buttons are gone too


def test_the_chat_displays_its_thread_as_html_and_enter_sends(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    cell(shell, "%config LoomMagics.display = 'widgets'")
    shell.user_ns["model"].add("Hello back.")
    assert cell(shell, "%%loom analyst", "Hello").success
    assert cell(shell, "%loom analyst").success
    chat = loom_session(shell).last_chat
    assert WIDGET in chat._repr_mimebundle_() and "Hello back." in _static(chat.view)[0]
    assert "Enter sends, Shift+Enter adds a line" in chat.input.placeholder
    assert "event.shiftKey" in ENTER_SENDS_JS and "button.loom-send" in ENTER_SENDS_JS


# ---- re-running the defining cell, Ctrl-C -----------------------------------------------------


def test_a_redefined_agent_with_a_new_memory_store_starts_a_new_thread_and_says_why(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    model = ReplayModel(["First.", "Second."])
    shell.user_ns["analyst"] = define_agent(name="analyst", model=model, store=memory_store())
    assert cell(shell, "%%loom analyst --result res", "Hi").success
    first = shell.user_ns["res"].thread.id
    shell.user_ns["analyst"] = define_agent(name="analyst", model=model, store=memory_store())
    capsys.readouterr()
    assert cell(shell, "%%loom analyst --result res", "Again").success
    out = capsys.readouterr().out
    assert f"ℹ analyst's thread {first} is no longer in its store" in out
    assert "memory store starts empty; keep threads with store=sqlite_store()" in out
    assert shell.user_ns["res"].thread.id != first


def test_a_redefined_agent_on_the_same_store_continues_the_thread(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    store = memory_store()
    model = ReplayModel(["First.", "Second."])
    shell.user_ns["analyst"] = define_agent(name="analyst", model=model, store=store)
    assert cell(shell, "%%loom analyst --result res", "Hi").success
    first = shell.user_ns["res"].thread.id
    shell.user_ns["analyst"] = define_agent(name="analyst", model=model, store=store)
    assert cell(shell, "%%loom analyst --result res", "Again").success
    assert shell.user_ns["res"].thread.id == first
    assert "no longer in its store" not in capsys.readouterr().out


@pytest.mark.parametrize("display", ["text", "widgets"])
def test_ctrl_c_is_one_line_and_an_interrupted_first_run_stays_current(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str], display: str
) -> None:
    async def slow(request: Any) -> Any:  # Ctrl-C arrives while the model is thinking
        os.kill(os.getpid(), signal.SIGINT)
        await asyncio.sleep(30)

    cell(shell, f"%config LoomMagics.display = {display!r}")
    store = memory_store()
    shell.user_ns["analyst"] = define_agent(name="analyst", model=FunctionModel(slow), store=store)
    r = cell(shell, "%%loom analyst", "A long question")
    assert isinstance(r.error_in_exec, RunInterrupted)
    captured = capsys.readouterr()
    shown = captured.out + captured.err
    tid = loom_session(shell).current["analyst"]
    assert tid is not None  # the interrupted first run's thread stays current
    line = (
        f"KeyboardInterrupt: analyst's run was interrupted; 1 completed message saved in "
        f"thread {tid}, which the next %%loom analyst continues"
    )
    assert line in shown and "Traceback" not in shown and "⚠ error:" not in shown
    assert shown.count("interrupted") == 1
    view: Any = loom_session(shell).last_view
    if display == "widgets":  # the view does not say it again: the cell's line says it
        assert not view.errors.children
        assert "interrupted" not in "".join(b.get("text/html", "") for b in view.static_bundles())
    assert store.load(tid).error == "The run was interrupted; what completed is saved."
    model = ReplayModel(["Went on."])
    shell.user_ns["analyst"] = define_agent(name="analyst", model=model, store=store)
    assert cell(shell, "%%loom analyst --result res", "Go on").success
    assert shell.user_ns["res"].thread.id == tid
    # the thread keeps where the run was interrupted, a part of loom_nb's own that the model's
    # view of the thread leaves out
    given = model.requests[0].messages
    assert [(m.role, m.text) for m in given] == [("user", "A long question"), ("user", "Go on")]
    saved = store.load(tid)
    assert saved.error is None and [len(m.interruptions) for m in saved.messages] == [0, 1, 0, 0]
    capsys.readouterr()
    assert cell(shell, f"%loom show {tid}").success  # and every view of it shows where
    if display == "widgets":
        shown_again: Any = loom_session(shell).last_view
        html = "".join(b.get("text/html", "") for b in shown_again.static_bundles())
        assert "⏹ <i>The run was interrupted here; what it had completed is saved.</i>" in html
    else:
        assert "⏹ The run was interrupted here" in capsys.readouterr().out


# ---- interpolation, setup errors ---------------------------------------------------------------


def test_unknown_names_and_expressions_in_braces_get_one_line(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    shell.user_ns["model"].add("ok", "ok")
    assert cell(shell, "%%loom analyst", "Above {undefined_name} and {threshold * 2}?").success
    err = capsys.readouterr().err
    [note] = [line for line in err.splitlines() if "sent as written" in line]
    assert "{undefined_name} (no variable 'undefined_name')" in note
    assert "{threshold * 2} (expressions in braces are not evaluated" in note
    assert shell.user_ns["model"].requests[-1].messages[-1].text == (
        "Above {undefined_name} and {threshold * 2}?"
    )
    assert cell(shell, "%%loom analyst", 'Above {threshold}, as {"json": 1}').success
    assert "sent as written" not in capsys.readouterr().err


def test_setup_errors_are_one_line_unless_xmode_is_verbose(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    code = "from loom_nb import define_agent, ReplayModel\ndefine_agent(name='a', model='openai:')"
    r = shell.run_cell(code, store_history=False)
    assert type(r.error_in_exec).__name__ == "UserError"
    shown = "".join(capsys.readouterr())
    assert "UserError: model 'openai:' names no model after 'openai:'" in shown
    assert "Traceback" not in shown and shown.strip().count("\n") == 0
    try:
        shell.run_cell("%xmode Verbose", store_history=False)
        shell.run_cell(code, store_history=False)
        assert "Traceback" in "".join(capsys.readouterr())
    finally:
        shell.run_cell("%xmode Context", store_history=False)


# ---- frame writes ------------------------------------------------------------------------------


def test_a_frame_write_card_and_its_outcome_say_files_did_not_change(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    cell(shell, "%config LoomMagics.display = 'widgets'")
    orders = pd.DataFrame({"id": [1, 2], "status": ["open", "open"]})
    model = ReplayModel(
        [
            Reply(
                "Closing it.",
                [
                    (
                        "frames_update",
                        {
                            "table": "orders",
                            "values": {"status": "closed"},
                            "filters": [{"column": "id", "op": "eq", "value": 1}],
                        },
                    )
                ],
            ),
            "Closed.",
        ]
    )
    connector = frame_tools({"orders": {"frame": orders, "write": True}})
    shell.user_ns["analyst"] = define_agent(name="analyst", model=model, connectors=connector)
    assert cell(shell, "%%loom analyst", "Close order 1").success
    view: Any = loom_session(shell).last_view
    card = view.cards[0]
    before = "memory only; files are not changed"
    assert before in card.preview.value and "orders.to_csv(...)" in card.preview.value
    card.approve()
    view.wait(10)
    outcome = card.decision_label.value
    assert "done: the DataFrame 'orders' changed in memory; files did not" in outcome
    assert "orders.to_csv(...)" in outcome and orders.status.tolist() == ["closed", "open"]
    result = view._messages[-2].tool_results[0]
    assert "no file was written" in result.content  # the model can tell the user too


@pytest.mark.skipif(sys.platform == "win32", reason="text view paths")
def test_text_mode_shows_the_frame_note_and_more_rows(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    orders = pd.DataFrame({"id": range(25)})
    model = ReplayModel(
        [
            Reply("Adding.", [("frames_append", {"table": "orders", "rows": [{"id": 99}]})]),
            Reply("Listing.", [("frames_select", {"table": "orders"})]),
            "Done.",
        ]
    )
    connector = frame_tools({"orders": {"frame": orders, "write": True}})
    shell.user_ns["analyst"] = define_agent(name="analyst", model=model, connectors=[connector])
    assert cell(shell, "%%loom analyst", "Add 99").success
    out = capsys.readouterr().out
    assert "ℹ This changes the DataFrame 'orders' in this kernel's memory only" in out
    call = loom_session(shell).pending()[0][1].pending[0].call_id
    assert cell(shell, f"%loom approve {call}").success
    out = capsys.readouterr().out
    assert "changed in memory; files did not: save it to keep it, e.g. orders.to_csv(...)" in out
    assert "… 16 more rows" in out  # the select's 26 rows, 10 shown
