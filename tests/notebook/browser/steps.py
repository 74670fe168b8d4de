"""The steps a person takes with an agent in a notebook, the same in every frontend: run the
notebook, watch the answer stream, read the fetched table and the write's card, approve it.

The frontend is a parameter: JupyterLab runs all cells by its command, Notebook 7 from the
menu bar, as a person there does; everything after that reads the same DOM.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tests.notebook.browser.lab import LabServer
from tests.notebook.browser.page import (
    MEDIUM,
    cell,
    cell_output_text,
    expect_text,
    open_notebook,
    run_all,
    run_all_from_menu,
    run_cell,
    screenshot,
    streamed_texts,
    wait_cell_done,
    watch_stream,
    write_notebook,
)


@dataclass(frozen=True)
class Frontend:
    """A Jupyter frontend: its name in screenshots, the fixture of its server, the name its
    page's app gives itself, and how a person runs every cell there."""

    name: str
    server: str
    app: str
    run_all: Callable[[Any, int], None]


LAB = Frontend("browser", "lab", "JupyterLab", run_all)
NOTEBOOK7 = Frontend("notebook7", "notebook7", "Jupyter Notebook", run_all_from_menu)


@dataclass(frozen=True)
class Ask:
    """A notebook of three cells (setup, the ``%%loom`` cell, a check of the kernel) whose
    agent fetches a table, then asks to write; what a person should read at each step."""

    cells: Sequence[str]
    question: str
    #: The assistant's second text, whole; while it streams it shows without ``later``.
    answer: str
    later: str
    #: A word of each row of the fetched table, in order, and one of a row left out.
    rows: Sequence[str]
    left_out: str
    #: What the write's card shows: the tool's name, then its values.
    card: Sequence[str]
    #: What the check cell prints before the write, and both lines after it.
    unwritten: str
    written: Sequence[str]
    #: The assistant's last text, once the approved write ran.
    done: str


def run_to_the_card(page: Any, server: LabServer, frontend: Frontend, ask: Ask, file: str) -> Any:
    """Open ``ask``'s notebook, run every cell, and check what a person reads up to the
    write's card: the question, the answer seen streaming, the table, the card, nothing
    written yet. Returns the thread's view."""
    write_notebook(server.root / file, list(ask.cells))
    open_notebook(page, server, file)
    assert page.evaluate("() => window.jupyterapp.name") == frontend.app  # really that app
    watch_stream(page)
    frontend.run_all(page, len(ask.cells))

    thread = cell(page, 1).locator(".loom-thread")
    expect_text(thread.locator(".loom-user"), ask.question)
    expect_text(thread.locator(".loom-assistant").nth(1), ask.answer)
    seen = streamed_texts(page)
    partial = [t for t in seen if ask.answer[:9] in t and ask.later not in t]
    assert partial, f"the answer never showed partially while streaming: {seen[:10]}"

    table = thread.locator(".loom-frame table")
    table.wait_for(timeout=MEDIUM)
    body_rows = table.locator("tbody tr")
    assert body_rows.count() == len(ask.rows)
    for i, word in enumerate(ask.rows):
        assert word in body_rows.nth(i).inner_text()
    assert ask.left_out not in table.inner_text()

    card = thread.locator(".loom-approval")
    assert card.count() == 1
    assert all(word in card.inner_text() for word in ask.card)
    assert ask.unwritten in cell_output_text(page, 2)
    screenshot(page, f"{frontend.name}-agent-awaiting-approval", cell(page, 1))
    return thread


def approve_the_write(page: Any, frontend: Frontend, ask: Ask, thread: Any) -> None:
    """Click Approve: the card says approved, then done; the run finishes; neither button
    can be clicked again; the kernel holds the written data and ``-o``'s frame."""
    card = thread.locator(".loom-approval")
    approve = card.locator("button.loom-approve")
    approve.click()
    expect_text(card.locator(".loom-decision"), "Approved")
    expect_text(card.locator(".loom-decision"), "done")
    expect_text(thread.locator(".loom-assistant").last, ask.done)
    assert approve.is_disabled()
    assert card.locator("button.loom-reject").is_disabled()
    screenshot(page, f"{frontend.name}-agent-approved", cell(page, 1))

    first = wait_cell_done(page, 2)
    run_cell(page, 2)
    wait_cell_done(page, 2, after=first)
    out = cell_output_text(page, 2)
    assert all(line in out for line in ask.written), out
