"""Chromium and notebook helpers: launch, write notebooks, open, run all, wait, screenshot.

The same helpers drive JupyterLab 4 and Notebook 7: both are built from JupyterLab's
notebook extension (``.jp-NotebookPanel``, ``.jp-InputPrompt``, ``notebook:*`` commands)."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.notebook.browser.lab import REPO_ROOT, LabServer

#: Flags that work for Debian's chromium headless as root in a container.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

#: Waits are on conditions; these only bound how long a slow, shared machine may take.
SLOW = 180_000  # ms
MEDIUM = 60_000  # ms

#: Records the text of every assistant message each time the DOM changes, so a test can
#: tell streamed text (seen growing) from text that arrived in one piece.
_WATCH_STREAM = """() => {
    window.__loomSeen = [];
    new MutationObserver(() => {
        for (const el of document.querySelectorAll('.loom-assistant')) {
            const t = el.innerText.trim();
            if (t && window.__loomSeen[window.__loomSeen.length - 1] !== t) {
                window.__loomSeen.push(t);
            }
        }
    }).observe(document.body, {subtree: true, childList: true, characterData: true});
}"""


def playwright_available() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as exc:
        return f"playwright is not installed: {exc}"
    return None


@contextmanager
def chromium_context(executable: str, profile: Path) -> Iterator[Any]:
    """A headless chromium with a fresh user-data dir; yields a Playwright BrowserContext."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile),
            executable_path=executable,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 1000},
        )
        try:
            yield context
        finally:
            context.close()


def write_notebook(path: Path, cells: Sequence[str]) -> Path:
    """A notebook of code cells, with kernelspec metadata (without it a dialog blocks)."""
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": None,
                "id": uuid.uuid4().hex[:8],
                "metadata": {},
                "outputs": [],
                "source": source,
            }
            for source in cells
        ],
        "metadata": {
            "kernelspec": {
                "display_name": "Python 3 (ipykernel)",
                "language": "python",
                "name": "python3",
            },
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb, indent=1))
    return path


def open_notebook(page: Any, lab: LabServer, name: str) -> None:
    """Open ``name`` (in JupyterLab at a fresh workspace URL: old tabs would come back and
    start kernels; in Notebook 7 at ``/notebooks/<name>``), and wait until its kernel is idle.

    Both expose ``window.jupyterapp``; its ``shell.currentWidget`` is the notebook panel."""
    workspace = f"t{uuid.uuid4().hex[:10]}"
    page.goto(lab.notebook_url(name, workspace), wait_until="domcontentloaded", timeout=SLOW)
    page.wait_for_function("() => window.jupyterapp !== undefined", timeout=SLOW)
    page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(timeout=SLOW)
    wait_kernel_idle(page)


def wait_kernel_idle(page: Any, timeout: int = SLOW) -> None:
    """The current notebook's kernel exists and reports idle (read from the app, not the UI)."""
    page.wait_for_function(
        """() => {
            const w = window.jupyterapp.shell.currentWidget;
            const k = w && w.sessionContext && w.sessionContext.session
                && w.sessionContext.session.kernel;
            return !!k && k.status === 'idle' && w.sessionContext.isReady;
        }""",
        timeout=timeout,
    )


def command(page: Any, name: str) -> None:
    """Run a JupyterLab command without waiting for it to finish (the block keeps
    page.evaluate from awaiting the returned promise)."""
    page.evaluate(f"() => {{ window.jupyterapp.commands.execute({json.dumps(name)}); }}")


def prompts(page: Any) -> list[str]:
    return list(page.locator(".jp-NotebookPanel .jp-CodeCell .jp-InputPrompt").all_inner_texts())


def wait_cells_done(page: Any, count: int, timeout: int = SLOW) -> None:
    """All ``count`` code cells have an execution number and none is running (``[*]``).

    The prompt is the reliable signal: kernel status flips to idle between cells."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(
            """(count) => {
                const ps = [...document.querySelectorAll(
                    '.jp-NotebookPanel .jp-CodeCell .jp-InputPrompt')]
                    .map(e => e.innerText.trim());
                return ps.length === count && ps.every(p => /^\\[\\d+\\]:$/.test(p));
            }""",
            arg=count,
            timeout=timeout,
        )
    except PlaywrightTimeout:
        outputs = page.locator(".jp-NotebookPanel .jp-Cell-outputArea").all_inner_texts()
        raise AssertionError(
            f"the cells did not all finish within {timeout / 1000:.0f}s; prompts "
            f"{prompts(page)}; outputs (a failed cell stops Run All):\n"
            + "\n---\n".join(o[-1500:] for o in outputs)
        ) from None


def run_all(page: Any, count: int, timeout: int = SLOW) -> None:
    """Run every cell and wait until all ``count`` cells have finished."""
    command(page, "notebook:run-all-cells")
    wait_cells_done(page, count, timeout)


def restart_kernel(page: Any) -> None:
    """Restart the notebook's kernel the way the menu does after its dialog, clear outputs,
    and wait until the kernel is idle again."""
    page.evaluate(
        "async () => { await window.jupyterapp.shell.currentWidget.sessionContext"
        ".session.kernel.restart(); }"
    )
    command(page, "notebook:clear-all-cell-outputs")
    page.wait_for_function(
        "() => document.querySelectorAll('.jp-NotebookPanel .jp-OutputArea-child').length === 0",
        timeout=MEDIUM,
    )
    wait_kernel_idle(page)


def insert_cell(page: Any, index: int, source: str) -> None:
    """Insert a code cell at ``index``, as a person typing it would."""
    page.evaluate(
        """([index, source]) => {
            const nb = window.jupyterapp.shell.currentWidget.content;
            nb.model.sharedModel.insertCell(index, {cell_type: 'code', source: source});
        }""",
        [index, source],
    )


def run_cell(page: Any, index: int) -> None:
    """Run one cell (without waiting for it)."""
    page.evaluate(
        """(index) => {
            const nb = window.jupyterapp.shell.currentWidget.content;
            nb.activeCellIndex = index;
            window.jupyterapp.commands.execute('notebook:run-cell');
        }""",
        index,
    )


def wait_cell_done(page: Any, index: int, after: int = 0, timeout: int = SLOW) -> int:
    """Wait until cell ``index`` shows an execution number above ``after``; return it."""
    handle = page.wait_for_function(
        r"""([index, after]) => {
            const p = document.querySelectorAll(
                '.jp-NotebookPanel .jp-CodeCell .jp-InputPrompt')[index];
            const m = p && p.innerText.trim().match(/^\[(\d+)\]:$/);
            return m && Number(m[1]) > after ? Number(m[1]) : false;
        }""",
        arg=[index, after],
        timeout=timeout,
    )
    return int(handle.json_value())


def cell(page: Any, index: int) -> Any:
    return page.locator(".jp-NotebookPanel .jp-CodeCell").nth(index)


def cell_output_text(page: Any, index: int) -> str:
    return str(cell(page, index).locator(".jp-Cell-outputArea").inner_text())


def screenshot(page: Any, name: str, element: Any = None) -> Path:
    """Save a screenshot under test-artifacts/ at the repository root: of ``element`` (a
    locator, scrolled into view and captured whole) or of the page."""
    out = REPO_ROOT / "test-artifacts"
    out.mkdir(exist_ok=True)
    path = out / f"{name}.png"
    if element is not None:
        element.scroll_into_view_if_needed(timeout=MEDIUM)
        element.screenshot(path=str(path), timeout=MEDIUM)
    else:
        page.screenshot(path=str(path), full_page=True)
    return path


def run_all_from_menu(page: Any, count: int, timeout: int = SLOW) -> None:
    """Run every cell the way a person does, from the menu bar's "Run > Run All Cells"
    (JupyterLab and Notebook 7 share the menu), and wait until all ``count`` cells finished."""
    page.locator(".lm-MenuBar-item", has_text=re.compile(r"^\s*Run\s*$")).click(timeout=MEDIUM)
    # By its label: the command behind it differs (Notebook 7: runmenu:run-all).
    label = page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^\s*Run All Cells\s*$"))
    page.locator(".lm-Menu-item[role=menuitem]", has=label).click(timeout=MEDIUM)
    wait_cells_done(page, count, timeout)


def watch_stream(page: Any) -> None:
    """From now on, record each text an assistant message shows (see :func:`streamed_texts`)."""
    page.evaluate(_WATCH_STREAM)


def streamed_texts(page: Any) -> list[str]:
    """Every text the assistant messages showed since :func:`watch_stream`, in order."""
    seen: list[str] = page.evaluate("() => window.__loomSeen")
    return seen


def expect_text(locator: Any, text: str, timeout: int = MEDIUM, *, drawn: bool = False) -> None:
    """Wait until ``locator`` contains ``text``; with ``drawn``, in its rendered text (what a
    person would read, folded parts left out). Waiting, not reading once: JupyterLab draws and
    un-draws cells as the notebook scrolls, so one read may find a cell not drawn."""
    from playwright.sync_api import expect

    expect(locator).to_contain_text(text, timeout=timeout, use_inner_text=drawn)
