"""End to end in a real browser: JupyterLab 4, Debian's chromium driven by Playwright.

What a person sees in the DOM, and what the kernel holds after their clicks.
"""

from __future__ import annotations

import textwrap
from typing import Any

import pytest
from browser import fixtures
from browser.lab import LabServer
from browser.page import (
    MEDIUM,
    cell,
    cell_output_text,
    open_notebook,
    run_all,
    run_cell,
    screenshot,
    wait_cell_done,
    write_notebook,
)

# The harness's fixtures: one JupyterLab for this module, a fresh chromium page per test.
lab = fixtures.lab
chromium = fixtures.chromium
page = fixtures.page

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]


def _cells(*sources: str) -> list[str]:
    return [textwrap.dedent(s).strip() for s in sources]


def test_widget_click_reaches_the_kernel(lab: LabServer, page: Any) -> None:
    """The harness itself: a plain ipywidgets button, clicked in chromium, runs on_click in
    the kernel, and a later cell sees it."""
    cells = _cells(
        """
        import ipywidgets as w
        clicks = []
        label = w.Label("not clicked")
        label.add_class("t-label")
        button = w.Button(description="Press me")
        button.add_class("t-button")
        def on_click(_):
            clicks.append(1)
            label.value = f"clicked {len(clicks)}"
        button.on_click(on_click)
        w.VBox([button, label])
        """,
        "print('kernel saw', len(clicks), 'clicks')",
    )
    write_notebook(lab.root / "button.ipynb", cells)
    open_notebook(page, lab, "button.ipynb")
    run_all(page, len(cells))
    assert "kernel saw 0 clicks" in cell_output_text(page, 1)

    page.locator(".t-button").click()
    page.locator(".t-label", has_text="clicked 1").wait_for(timeout=MEDIUM)

    first = wait_cell_done(page, 1)
    run_cell(page, 1)
    wait_cell_done(page, 1, after=first)
    assert "kernel saw 1 clicks" in cell_output_text(page, 1)
    assert cell(page, 0).locator(".t-button").is_enabled()
    screenshot(page, "browser-harness-button")
