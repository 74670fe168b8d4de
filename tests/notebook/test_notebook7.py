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
    cell,
    expect_text,
    open_notebook,
    run_all_from_menu,
    screenshot,
    wait_kernel_idle,
    write_notebook,
)
from tests.notebook.browser.steps import NOTEBOOK7, Ask, approve_the_write, run_to_the_card

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


STOCK_ASK = Ask(
    cells=[textwrap.dedent(s).strip() for s in (SETUP, ASK, KERNEL_CHECK)],
    question="Which items are low on stock?",
    answer="Two items are low: bolts with 4 and washers with 7.",
    later="bolts now",
    rows=["bolts", "washers"],
    left_out="nuts",
    card=["reorder", "A-1", "100"],
    unwritten="bolts in stock: 4",
    written=["bolts in stock: 104", "rows in low_df: 2"],
    done="Done: 100 bolts are on order",
)


def test_agent_run_and_approve_in_notebook7(notebook7: LabServer, notebook7_page: Any) -> None:
    """A person opens the notebook in Notebook 7 and picks Run > Run All Cells: the answer
    streams in, the fetched DataFrame is a table, the write waits on an approval card;
    Approve runs it, the card shows the outcome, the run finishes, and the kernel has the
    written data. The steps are JupyterLab's (``browser/steps.py``), from another menu."""
    page = notebook7_page
    thread = run_to_the_card(page, notebook7, NOTEBOOK7, STOCK_ASK, "stock.ipynb")
    # Really Notebook 7's single-document page, not JupyterLab.
    assert "/notebooks/stock.ipynb" in page.url
    assert page.evaluate("() => window.jupyterapp.name") == "Jupyter Notebook"
    approve_the_write(page, NOTEBOOK7, STOCK_ASK, thread)
    screenshot(page, "notebook7-approved-page")


def test_old_card_after_a_restart_explains_in_notebook7(
    notebook7: LabServer, notebook7_page: Any
) -> None:
    """Kernel restarted with the outputs kept: the card says how to decide instead of showing
    buttons that reach nobody, and nothing is written."""
    page = notebook7_page
    cells = list(STOCK_ASK.cells)
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
