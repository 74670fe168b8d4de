"""End to end in Notebook 7 (``jupyter notebook``, ipywidgets 8), Debian's chromium driven
by Playwright: what a person sees, and what the kernel holds after their click.

JupyterLab is covered by test_browser.py; Notebook 7 is a different app with its own
shell, menus and page layout, built from the same notebook extension, so widgets can
break in one and not the other.
"""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from tests.notebook.browser import fixtures
from tests.notebook.browser.lab import LabServer
from tests.notebook.browser.page import (
    MEDIUM,
    cell,
    cell_output_text,
    open_notebook,
    run_all_from_menu,
    run_cell,
    screenshot,
    streamed_texts,
    wait_cell_done,
    wait_kernel_idle,
    watch_stream,
    write_notebook,
)

notebook7 = fixtures.notebook7
chromium = fixtures.chromium
notebook7_page = fixtures.notebook7_page

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.timeout(900)]

SETUP = """
import pandas as pd
from loom_nb import Reply, ReplayModel, define_agent, tool
from loom_nb.sqlite import sqlite_store

%load_ext loom_nb

STOCK = pd.DataFrame({
    "sku": ["A-1", "B-2", "C-3"],
    "item": ["bolts", "nuts", "washers"],
    "qty": [4, 250, 7],
})

@tool
def low_stock() -> pd.DataFrame:
    "Items with fewer than 10 in stock."
    return STOCK[STOCK.qty < 10].reset_index(drop=True)

@tool(needs_approval=True)
def reorder(sku: str, qty: int) -> dict:
    "Order more of an item; it is added to the stock."
    STOCK.loc[STOCK.sku == sku, "qty"] += qty
    return {"sku": sku, "qty": int(STOCK.loc[STOCK.sku == sku, "qty"].iloc[0])}

model = ReplayModel(
    [
        Reply("Let me check the stock.", tool_calls=[("low_stock", {})]),
        Reply(
            "Two items are low: bolts with 4 and washers with 7. "
            "I will reorder 100 bolts now.",
            tool_calls=[("reorder", {"sku": "A-1", "qty": 100})],
        ),
        Reply("Done: 100 bolts are on order, and the stock of bolts is now 104."),
    ],
    delay=0.05,  # streams word by word, like a model
)
clerk = define_agent(
    name="clerk", model=model, tools=[low_stock, reorder], store=sqlite_store("stock.db")
)
"""

ASK = """
%%loom clerk --new -o low_df
Which items are low on stock? Reorder 100 bolts.
"""

KERNEL_CHECK = """
print("rows in low_df:", len(low_df))
print("bolts in stock:", int(STOCK.loc[STOCK.sku == "A-1", "qty"].iloc[0]))
"""


def test_agent_run_and_approve_in_notebook7(notebook7: LabServer, notebook7_page: Any) -> None:
    """A person opens the notebook in Notebook 7 and picks Run > Run All Cells: the answer
    streams in, the fetched DataFrame is a table, the write waits on an approval card;
    Approve runs it, the card shows the outcome, the run finishes, and the kernel has the
    written data."""
    page = notebook7_page
    cells = [textwrap.dedent(s).strip() for s in (SETUP, ASK, KERNEL_CHECK)]
    write_notebook(notebook7.root / "stock.ipynb", cells)
    open_notebook(page, notebook7, "stock.ipynb")
    # Really Notebook 7's single-document page, not JupyterLab.
    assert "/notebooks/stock.ipynb" in page.url
    assert page.evaluate("() => window.jupyterapp.name") == "Jupyter Notebook"
    watch_stream(page)
    run_all_from_menu(page, len(cells))

    thread = cell(page, 1).locator(".loom-thread")
    expect_text(thread.locator(".loom-user"), "Which items are low on stock?")
    answer = "Two items are low: bolts with 4 and washers with 7."
    expect_text(thread.locator(".loom-assistant").nth(1), answer)
    seen = streamed_texts(page)
    partial = [t for t in seen if "Two items" in t and "bolts now" not in t]
    assert partial, f"the answer never showed partially while streaming: {seen[:10]}"

    # The DataFrame the tool returned: a table of the two low items.
    table = thread.locator(".loom-frame table")
    table.wait_for(timeout=MEDIUM)
    rows = table.locator("tbody tr")
    assert rows.count() == 2
    assert "bolts" in rows.nth(0).inner_text()
    assert "washers" in rows.nth(1).inner_text()
    assert "nuts" not in table.inner_text()

    # The write waits on a card that says what will happen; nothing is written yet.
    card = thread.locator(".loom-approval")
    assert card.count() == 1
    assert "reorder" in card.inner_text()
    assert "A-1" in card.inner_text() and "100" in card.inner_text()
    assert "bolts in stock: 4" in cell_output_text(page, 2)
    screenshot(page, "notebook7-awaiting-approval", cell(page, 1))

    approve = card.locator("button.loom-approve")
    approve.click()
    expect_text(card.locator(".loom-decision"), "Approved")
    expect_text(card.locator(".loom-decision"), "done")
    expect_text(thread.locator(".loom-assistant").last, "Done: 100 bolts are on order")
    assert approve.is_disabled()
    assert card.locator("button.loom-reject").is_disabled()
    screenshot(page, "notebook7-approved", cell(page, 1))
    screenshot(page, "notebook7-approved-page")

    # Kernel side: the approved write changed the data, and -o bound the fetched frame.
    first = wait_cell_done(page, 2)
    run_cell(page, 2)
    wait_cell_done(page, 2, after=first)
    out = cell_output_text(page, 2)
    assert "bolts in stock: 104" in out
    assert "rows in low_df: 2" in out


def test_old_card_after_a_restart_explains_in_notebook7(
    notebook7: LabServer, notebook7_page: Any
) -> None:
    """Kernel restarted with the outputs kept: the card says how to decide instead of showing
    buttons that reach nobody, and nothing is written."""
    page = notebook7_page
    cells = [textwrap.dedent(s).strip() for s in (SETUP, ASK, KERNEL_CHECK)]
    write_notebook(notebook7.root / "restart.ipynb", cells)
    open_notebook(page, notebook7, "restart.ipynb")
    run_all_from_menu(page, len(cells))
    card = cell(page, 1).locator(".loom-approval")
    expect_text(card, "reorder")
    page.evaluate(
        "async () => { await window.jupyterapp.shell.currentWidget.sessionContext"
        ".session.kernel.restart(); }"
    )
    wait_kernel_idle(page)
    expect_text(card.locator(".loom-offline"), "run %loom approvals to decide")
    assert not card.locator("button.loom-approve").is_visible()
    screenshot(page, "notebook7-old-card-after-restart", cell(page, 1))


def expect_text(locator: Any, text: str, timeout: int = MEDIUM) -> None:
    """Wait until ``locator`` is visible and contains ``text`` (what a person would read)."""
    from playwright.sync_api import expect

    expect(locator).to_contain_text(text, timeout=timeout)
