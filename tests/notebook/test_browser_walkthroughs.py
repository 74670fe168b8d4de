"""The walkthroughs in JupyterLab (chromium), improvised on as a person does (issue 26.2):
clicking what the text invites to click, running a cell twice, Run All twice in one kernel,
and a ``%%loom`` cell of one's own after the last. One browser session per notebook.

tests/test_improvisations.py drives the same improvisations headless in every walkthrough;
here the clicks are a mouse's and what is read is what JupyterLab draws.
"""

from __future__ import annotations

import re
from typing import Any

import nbformat
import pytest

from tests.notebook.browser import fixtures
from tests.notebook.browser.lab import REPO_ROOT, LabServer
from tests.notebook.browser.page import (
    MEDIUM,
    SLOW,
    cell,
    cell_output_text,
    command,
    expect_text,
    insert_cell,
    open_notebook,
    restart_kernel,
    run_cell,
    screenshot,
    wait_cell_done,
)

lab = fixtures.lab
chromium = fixtures.chromium
page = fixtures.page

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.timeout(900)]

STDERR = "application/vnd.jupyter.stderr"  # errors are drawn under it too
OWN_QUESTION = "Thanks! What else should I look at?"


class Walkthrough:
    """A walkthrough opened in JupyterLab from its own folder (its own ``.loom``), and how a
    person runs its code cells (counted among code cells, as the prompts are)."""

    def __init__(self, page: Any, lab: LabServer, name: str) -> None:
        self.page = page
        nb = nbformat.read(REPO_ROOT / "notebooks" / name, as_version=4)
        self.sources = [c.source for c in nb.cells if c.cell_type == "code"]
        self._at = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
        #: The first code cell after the text that asks for a restart (0: none asked).
        self.restart = next(
            (
                sum(c.cell_type == "code" for c in nb.cells[:i])
                for i, c in enumerate(nb.cells)
                if "restart-kernel" in c.metadata.get("tags", [])
            ),
            0,
        )
        folder = lab.root / name.removesuffix(".ipynb")
        folder.mkdir()
        nbformat.write(nb, folder / name)
        open_notebook(page, lab, f"{folder.name}/{name}")

    def index(self, start: str) -> int:
        """The code cell whose source starts with ``start``."""
        return next(i for i, s in enumerate(self.sources) if s.startswith(start))

    def run(self, code_index: int) -> str:
        """Run one code cell, as Shift+Enter does; its output's text."""
        before = self.prompt(code_index)
        run_cell(self.page, self._at[code_index])
        wait_cell_done(self.page, code_index, after=before)
        return cell_output_text(self.page, code_index)

    def run_through(self, start: int, stop: int) -> None:
        for index in range(start, stop):
            self.run(index)

    def prompt(self, code_index: int) -> int:
        found = re.match(
            r"\[(\d+)\]",
            cell(self.page, code_index).locator(".jp-InputPrompt").inner_text().strip(),
        )
        return int(found.group(1)) if found else 0

    def run_all(self) -> None:
        """Run > Run All Cells in the kernel as it is (Run All restarts nothing); waits until
        the last cell ran again (a failing cell stops Run All, and this says which)."""
        last = len(self.sources) - 1
        before = self.prompt(last)
        command(self.page, "notebook:run-all-cells")
        try:
            wait_cell_done(self.page, last, after=before, timeout=SLOW)
        except Exception as exc:
            raise AssertionError(
                f"Run All stopped before the last cell: {self.complaints()}"
            ) from exc

    def complaints(self) -> list[str]:
        """What a person reads as gone wrong: each red output (errors and stderr), and the
        extension saying it is loaded already."""
        red = self.page.locator(
            f".jp-NotebookPanel .jp-OutputArea-output[data-mime-type='{STDERR}']"
        )
        red = red.all_inner_texts()
        loaded = [
            t
            for t in self.page.locator(".jp-NotebookPanel .jp-OutputArea-output").all_inner_texts()
            if "already loaded" in t
        ]
        return [t[:500] for t in red + loaded]

    def own_question(self, agent: str, says: str = "stand-in model") -> Any:
        """A ``%%loom`` cell of one's own after the last: it continues the thread; the
        stand-in answers in words. Returns the new cell's thread view."""
        count = self.page.evaluate(
            "() => window.jupyterapp.shell.currentWidget.content.model.cells.length"
        )
        insert_cell(self.page, count, f"%%loom {agent}\n{OWN_QUESTION}")
        self.sources.append(f"%%loom {agent}\n{OWN_QUESTION}")
        self._at.append(count)
        self.run(len(self.sources) - 1)
        shown = cell(self.page, len(self.sources) - 1).locator(".loom-thread")
        expect_text(shown.locator(".loom-user").last, OWN_QUESTION)
        expect_text(shown.locator(".loom-assistant").last, says)
        return shown


def _run_all_twice(w: Walkthrough) -> None:
    """Run All twice in the kernel as it is; nothing red anywhere."""
    w.run_all()
    assert w.complaints() == []
    w.run_all()
    assert w.complaints() == []


def test_quickstart_improvised_in_the_browser(lab: LabServer, page: Any) -> None:
    """01-quickstart: Approve clicked on the write's card as the text says (the next cell then
    clicks nothing more), its card read as sentences, the waiting cell run twice (not asked
    twice), the restart, Run All twice, and a question of one's own at the end."""
    w = Walkthrough(page, lab, "01-quickstart.ipynb")
    flag = w.index("%%loom analyst\nFlag them")
    w.run_through(0, flag + 1)

    # the second cell on the thread: its header says what this cell asked
    header = cell(page, flag).locator(".loom-thread-header").inner_text()
    assert "Flag them as priority." in header and "Which orders" not in header, header
    card = cell(page, flag).locator(".loom-approval")
    said = " ".join(card.inner_text().split())
    assert said.startswith("frames_update waits for your approval"), said
    # labels in words, values as the table writes them (two decimals, dates without a time)
    assert "Table: orders" in said and "3 rows match now" in said, said
    assert "Where: id IN (3, 7, 1)" in said, said
    assert "3 Cleo open 310.00 2026-01-12 False True" in said, said
    assert "rows_matched" not in said and '"' not in said and "call_" not in said, said
    card.locator("button.loom-approve").click()  # "Click Approve on the card above."
    expect_text(card.locator(".loom-decision"), "done")
    waited = w.run(flag + 1)  # the cell that clicks for a notebook run without a browser
    assert waited.startswith("complete | Done. Updated 3 row(s) of 'orders'"), waited
    assert "Cleo" in w.run(flag + 2)

    cancel = w.index("%%loom analyst\nPlease cancel")
    w.run_through(flag + 2, cancel + 1)
    again = w.run(cancel)  # run twice: the waiting card again, the question not sent again
    assert "was not sent again" in again, again
    assert cell(page, cancel).locator(".loom-approval button.loom-approve").count() == 1

    restart_kernel(page)  # "Restart the kernel now"
    w.run_through(w.restart, len(w.sources))
    assert w.complaints() == []
    assert "cancelled" in cell_output_text(page, len(w.sources) - 1)

    _run_all_twice(w)
    w.own_question("analyst")
    assert w.complaints() == []
    screenshot(page, "browser-quickstart-improvised", cell(page, len(w.sources) - 1))


def test_exploration_improvised_in_the_browser(lab: LabServer, page: Any) -> None:
    """05-exploration: Run All, then unfold a call as the text invites (the pandas code that
    reproduces it), the asking cell run again (its chart drawn again), Run All again in the same
    kernel (the export written over, run again), and a question of one's own at the end."""
    w = Walkthrough(page, lab, "05-exploration.ipynb")
    w.run_all()
    assert w.complaints() == []
    asked = w.index("%%loom explorer")
    thread = cell(page, asked).locator(".loom-thread")
    call = thread.locator(".loom-tool-call").first
    call.scroll_into_view_if_needed(timeout=MEDIUM)  # JupyterLab draws only the cells in view
    expect_text(call, "orders")
    expect_text(call, "week", drawn=True)
    assert not call.locator(".loom-code").is_visible()  # folded: the query in words
    call.locator("[class*='Collapse-header']").first.click()  # "unfold it"
    code = call.locator(".loom-code")
    expect_text(code, "groupby")
    expect_text(code, "orders", drawn=True)

    again = w.run(asked)  # the cell run twice: the thread goes on, its chart drawn again
    assert "Traceback" not in again
    expect_text(thread.locator(".loom-assistant").last, "open orders above 100 in")
    assert thread.locator("img.loom-chart-image").count() >= 1
    assert w.complaints() == []

    _run_all_twice(w)
    w.own_question("analyst")
    assert w.complaints() == []
    screenshot(page, "browser-exploration-improvised", cell(page, len(w.sources) - 1))

    # the notebook %loom export wrote opens on its story, its helpers folded, and unmodified
    open_notebook(page, lab, "05-exploration/exported/weekly-open-orders.ipynb")
    page.wait_for_timeout(2000)  # time for what JupyterLab writes into a model once it is open
    dirty = "() => window.jupyterapp.shell.currentWidget.context.model.dirty"
    assert page.evaluate(dirty) is False
    assert page.locator(".jp-NotebookPanel .jp-InputPlaceholder").count() >= 1  # folded
    screenshot(page, "browser-exported-notebook-opened")


def test_rules_and_questions_improvised_in_the_browser(lab: LabServer, page: Any) -> None:
    """06-rules-and-questions: the filing cell run twice (the batch's card again, nothing
    filed twice), Reject clicked on that card (the next cell then rejects nothing more), the
    question card read in words, the restart, **fiscal** clicked
    on the question card as the text says (the run goes on with that answer), Run All twice,
    and a question of one's own at the end."""
    w = Walkthrough(page, lab, "06-rules-and-questions.ipynb")
    filed = w.index("%%loom cleaner --result filed")
    w.run_through(0, filed + 2)
    again = w.run(filed)  # run twice: the batch's card again, the inbox not filed twice
    assert "was not sent again" in again, again
    assert "33 tickets" in w.run(filed + 1)
    card = cell(page, filed).locator(".loom-approval")
    expect_text(card, "frames_append waits for your approval")
    card.locator("button.loom-reject").click()  # "its card above has the same buttons"
    expect_text(card.locator(".loom-decision"), "Rejected")
    assert "Traceback" not in w.run(filed + 2)  # rejects nothing more; the rule revoked

    asked = w.index("%%loom cleaner --new --result asked")
    w.run(asked)
    question = cell(page, asked).locator(".loom-question")
    expect_text(question, "Last quarter: fiscal or calendar?")
    said = " ".join(question.inner_text().split())
    assert said.startswith("The agent asks you Last quarter"), said  # no call id in words

    restart_kernel(page)  # "Restart the kernel now"
    w.run_through(w.restart, w.restart + 2)  # the setup again, then %loom approvals
    shown = cell(page, w.restart + 1).locator(".loom-question")
    expect_text(shown, "Last quarter: fiscal or calendar?")
    shown.locator("button.loom-choice", has_text="fiscal").click()  # "Click fiscal above"
    expect_text(shown.locator(".loom-decision"), "fiscal · answered")  # the run went on
    assert shown.locator("button.loom-choice").first.is_disabled()
    answered = w.run(w.restart + 2)  # the cell that clicks when nobody did: it waits instead
    assert "Counting by the fiscal quarter: 12 tickets." in answered, answered
    assert w.complaints() == []

    _run_all_twice(w)
    w.own_question("cleaner")
    assert w.complaints() == []
    screenshot(page, "browser-rules-improvised", cell(page, len(w.sources) - 1))


def test_real_models_improvised_in_the_browser(lab: LabServer, page: Any) -> None:
    """04-real-models offline: Continue clicked on the budget card as the text says (the next
    cell then only waits for that run), Run All twice, and a question of one's own at the end
    (the replay model says what it knows)."""
    w = Walkthrough(page, lab, "04-real-models.ipynb")
    frugal = w.index("%%loom frugal")
    w.run_through(0, frugal + 1)
    assert "MODEL: offline replay model" in cell_output_text(page, w.index("import os"))
    card = cell(page, frugal).locator(".loom-approval")
    expect_text(card, "paused the run")
    card.locator("button.loom-approve", has_text="Continue").click()  # "Click Continue."
    expect_text(card.locator(".loom-decision"), "done")
    waited = w.run(frugal + 1)
    assert waited.startswith("complete | "), waited
    w.run_through(frugal + 2, len(w.sources))
    assert w.complaints() == []

    _run_all_twice(w)
    w.own_question("analyst", says="(replay model) I only know this notebook's question")
    assert w.complaints() == []
    screenshot(page, "browser-real-models-improvised", cell(page, len(w.sources) - 1))


def test_supabase_improvised_in_the_browser(lab: LabServer, page: Any) -> None:
    """02-supabase offline (DataFrames stand in for the tables): the ticket's cell run twice
    (its card again, not asked twice), Approve clicked on that card as the text says (the next
    cell then only waits), Run All twice, and a question of one's own at the end."""
    w = Walkthrough(page, lab, "02-supabase.ipynb")
    ticket = w.index("%%loom ada -o new_ticket")
    w.run(0)
    assert w.run(1).startswith("MODE: offline")  # no SUPABASE_URL: DataFrames stand in
    w.run_through(2, ticket + 1)
    again = w.run(ticket)
    assert "was not sent again" in again, again
    card = cell(page, ticket).locator(".loom-approval")
    card.locator("button.loom-approve").click()  # "Click **Approve**"
    expect_text(card.locator(".loom-decision"), "done")
    waited = w.run(ticket + 1)
    assert waited.startswith("complete"), waited
    assert "Order 3 is late" in waited, waited
    w.run_through(ticket + 2, len(w.sources))
    assert w.complaints() == []

    _run_all_twice(w)
    w.own_question("ada")
    assert w.complaints() == []
    screenshot(page, "browser-supabase-improvised", cell(page, len(w.sources) - 1))


def test_own_connector_improvised_in_the_browser(lab: LabServer, page: Any) -> None:
    """03-your-own-connector: the refund of 500 run twice (its card again, not asked twice),
    Reject clicked on its card as the text says (the next cell then rejects nothing more, no
    refund sent), Run All twice, and a question of one's own at the end."""
    w = Walkthrough(page, lab, "03-your-own-connector.ipynb")
    refund = w.index("%%loom billing_bot\nNow refund 500")
    w.run_through(0, refund + 1)
    again = w.run(refund)
    assert "was not sent again" in again, again
    card = cell(page, refund).locator(".loom-approval")
    card.locator("button.loom-reject").click()  # "click Reject"
    expect_text(card.locator(".loom-decision"), "Rejected")
    told = w.run(refund + 1)
    assert "you rejected the refund" in told and "refunds sent: [('INV-2', 20.0)]" in told, told
    w.run_through(refund + 2, len(w.sources))
    assert w.complaints() == []

    _run_all_twice(w)
    w.own_question("billing_bot")
    assert w.complaints() == []
    screenshot(page, "browser-own-connector-improvised", cell(page, len(w.sources) - 1))


def test_evals_improvised_in_the_browser(lab: LabServer, page: Any) -> None:
    """07-evals: the replay run twice (the same comparison, the suite not grown), Run All
    twice, and a question of one's own at the end."""
    w = Walkthrough(page, lab, "07-evals.ipynb")
    replay = w.index("%loom eval --model careless")
    w.run_through(0, replay + 1)
    first = cell_output_text(page, replay)
    assert "2 of 3 threads equal" in first, first
    assert "2 of 3 threads equal" in w.run(replay)
    w.run_through(replay + 1, len(w.sources))
    assert w.complaints() == []

    _run_all_twice(w)
    w.own_question("analyst", says="I am a scripted stand-in")
    assert w.complaints() == []
    screenshot(page, "browser-evals-improvised", cell(page, len(w.sources) - 1))
