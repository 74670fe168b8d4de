"""In JupyterLab with chromium: a model whose every reply is hostile HTML and markdown (see
hostile.py) cannot run script, click its own write's Approve, or write a file, while that write
waits: in the live run as it streams, in the chat, after a restart (``%loom resume`` and
``%loom show``), and in the notebook saved and opened again.

A control shows the same payloads the unsafe way (an Output widget holding ``text/markdown``,
as the live view did before issue 20) with a script that only records which ran: it proves
this browser runs them, and it is the clock the checks wait on (an ``<img src=x onerror>``
fires after its request fails, so once the control's has fired, any in the views would have).
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import require
from tests.notebook.browser import fixtures
from tests.notebook.browser.lab import LabServer, jupyter_lab_available, start_lab
from tests.notebook.browser.page import (
    MEDIUM,
    cell,
    cell_output_text,
    command,
    insert_cell,
    open_notebook,
    restart_kernel,
    run_all,
    run_cell,
    screenshot,
    streamed_texts,
    wait_cell_done,
    watch_stream,
    write_notebook,
)

chromium = fixtures.chromium
page = fixtures.page


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    """JupyterLab as ``fixtures.lab`` starts it, with every cell attached to the page: the
    hostile replies make long outputs, and JupyterLab's default content-visibility windowing
    leaves the prompts of cells scrolled away blank, which the harness reads."""
    missing = jupyter_lab_available()
    require(missing is None, missing or "")
    base = tmp_path_factory.mktemp("lab")
    tracker = base / "home" / "lab-settings" / "@jupyterlab" / "notebook-extension"
    tracker.mkdir(parents=True)
    (tracker / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    server = start_lab(base)
    try:
        yield server
    finally:
        server.stop()


pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.timeout(900)]

SETUP = """
import asyncio
from pathlib import Path
import ipywidgets as w
import pandas as pd
from IPython.display import display
from loom_nb import FunctionModel, Reply, define_agent, tool
from loom_nb.notebook import session
from loom_nb.sqlite import sqlite_store
from tests.notebook.hostile import (
    ATTACK, HOSTILE_LINE, HOSTILE_REPLY, PAYLOADS, SCRIPTED, control, fill,
)

%load_ext loom_nb

@tool
def notes() -> pd.DataFrame:
    "The notes (their column names, values and categories are hostile)."
    frame = pd.DataFrame({fill(PAYLOADS["img-onerror"], ATTACK): [HOSTILE_LINE, "ok"]})
    frame["kind"] = pd.Categorical([fill(PAYLOADS["details-ontoggle"], ATTACK), "plain"])
    return frame

@tool
def broken(why: str) -> str:
    "Fails with the model's text as its error."
    raise ValueError(why)

@tool(needs_approval=True)
def save_note(note: str) -> str:
    "Write the note to written.txt (waits for approval)."
    Path("written.txt").write_text(note)
    return "saved"

async def script(request):
    "Every reply hostile; answers from the thread's state, so it works after a restart."
    last = request.messages[-1]
    if last.role == "user":
        reply = Reply(HOSTILE_REPLY, [("notes", {}), ("broken", {"why": HOSTILE_LINE})])
    elif any(r.name == "notes" for r in last.tool_results):
        reply = Reply(HOSTILE_REPLY, [("save_note", {"note": HOSTILE_LINE})])
    else:
        reply = Reply(HOSTILE_REPLY)
    for event in reply.events(chunk_words=4):
        await asyncio.sleep(0.005)  # streams, like a model
        yield event

store = sqlite_store("inert.db")
tools = [notes, broken, save_note]
analyst = define_agent(name="analyst", model=FunctionModel(script), tools=tools, store=store)
scribe = define_agent(name="scribe", model=FunctionModel(script), tools=tools, store=store)
PROMPT = HOSTILE_LINE  # the user's prompt (and so the thread's title) quotes the data too
"""

ASK = """
%%loom analyst --new
{PROMPT}
"""

#: The payloads shown the unsafe way, with a script that only records which ran.
CONTROL = """
unsafe = w.Output()
unsafe.add_class("t-control")
text = "\\n\\n".join(fill(PAYLOADS[n], control(n)) for n in SCRIPTED)
unsafe.outputs = ({"output_type": "display_data", "metadata": {},
                   "data": {"text/markdown": text, "text/plain": ""}},)
display(unsafe)
"""

#: The static form beside every view, as a trusted output (a saved notebook without widgets).
STATIC = """
display({"text/html": session().last_view.static_html(), "text/plain": ""}, raw=True)
"""

CHECK = """
print("written:", Path("written.txt").exists(), "pwned:", Path("pwned.txt").exists())
"""

#: Records, from now on, anything in loom's views that could act: elements with event
#: handlers, javascript:/data: URLs (but a chart's PNG), and script-bearing or posing tags in
#: the HTML loom draws (widget HTML and the static form). The one <style> allowed is the
#: project's own (PAGE_STYLE's sheets, and the rule by which a view hides its static copy;
#: the stylesheet widget's class comes too late to tell).
_GUARD = """([sheets, hiding]) => {
    window.__loomBad = window.__loomBad || [];
    const BAD = new Set(['SCRIPT', 'IFRAME', 'FRAME', 'OBJECT', 'EMBED', 'FORM', 'SVG', 'MATH',
        'STYLE', 'INPUT', 'BUTTON', 'TEXTAREA', 'SELECT', 'VIDEO', 'AUDIO', 'META', 'BASE',
        'LINK', 'SOURCE']);
    const scan = (root) => {
        if (!(root instanceof Element)) return;
        for (const el of [root, ...root.querySelectorAll('*')]) {
            if (!el.closest('.loom-thread, .loom-chat, .loom-thread-static')) continue;
            if (el.closest('.loom-style')) continue;
            const drawn = el.closest('.widget-html-content, .loom-thread-static');
            const key = (el.textContent.match(/loom-static-([0-9a-f]+)/) || [])[1];
            const ours = el.tagName === 'STYLE' && (sheets.includes(el.textContent)
                || (key && el.textContent === hiding.replaceAll('KEY', key)));
            if (drawn && drawn !== el && BAD.has(el.tagName.toUpperCase()) && !ours) {
                window.__loomBad.push('<' + el.tagName + '> ' + el.outerHTML.slice(0, 80));
            }
            for (const a of el.attributes) {
                const v = a.value.replace(/[\\s\\u0000-\\u0020]/g, '').toLowerCase();
                const png = el.tagName === 'IMG' && v.startsWith('data:image/png;base64,');
                if (a.name.startsWith('on') || a.name === 'srcdoc'
                    || ((v.startsWith('javascript:') || v.startsWith('data:')) && !png)) {
                    window.__loomBad.push(el.tagName + ' ' + a.name + '=' + a.value.slice(0, 60));
                }
            }
        }
    };
    scan(document.body);
    if (!window.__loomGuard) {
        window.__loomGuard = new MutationObserver((records) => {
            for (const r of records) {
                scan(r.target);
                for (const n of r.addedNodes) scan(n);
            }
        });
        window.__loomGuard.observe(document.body,
            {subtree: true, childList: true, attributes: true});
    }
}"""


#: Payloads seen to run shown the unsafe way here (JupyterLab 4.6, chromium): an
#: ``<img onerror>``, ``<details ontoggle>`` and a plain ``<script>`` (others, such as
#: ``<video><source onerror>``, ``<svg><animate onbegin>`` and ``<iframe srcdoc>``, ran too).
RUN_UNSAFE = ["img-onerror", "details-ontoggle", "script"]


def guard(page: Any) -> None:
    from loom_nb.notebook._html import PAGE_STYLE
    from loom_nb.notebook._static import hiding_style

    sheets = re.findall(r"<style>(.*?)</style>", PAGE_STYLE, flags=re.S)
    [hiding] = re.findall(r"<style>(.*?)</style>", hiding_style("KEY"), flags=re.S)  # a view's
    page.evaluate(_GUARD, [sheets, hiding])


def controls_ran(page: Any) -> None:
    """Wait until the control's script ran (the browser runs such payloads, and had time)."""
    page.wait_for_function(
        "(names) => names.every(n => (window.__loomControl || []).includes(n))",
        arg=RUN_UNSAFE,
        timeout=MEDIUM,
    )


def assert_inert(page: Any, root: Path, shown: Any) -> None:
    """Nothing ran, nothing acts, the write waits: the card's Approve is live and unclicked,
    no file was written; the hostile text reads as text in ``shown``."""
    guard(page)  # scan what is on the page now, too
    assert page.evaluate("() => window.__loomPwned") is None
    bad = page.evaluate("() => window.__loomBad")
    assert bad == [], sorted(set(bad))[:20]
    assert not (root / "pwned.txt").exists() and not (root / "written.txt").exists()
    card = shown.locator(".loom-approval").last
    assert card.is_visible()  # the <style> payload did not hide it
    approve = card.locator("button.loom-approve")
    assert approve.is_visible() and approve.is_enabled()
    assert card.locator(".loom-decision").inner_text().strip() == ""
    said = shown.locator(".loom-assistant").last.inner_text()
    assert "onerror=" in said and "$\\href{javascript:" in said  # as text, not typeset
    # links the model wrote go nowhere: clicking each runs nothing
    links = shown.locator(".loom-assistant a")
    for i in range(links.count()):
        links.nth(i).click(timeout=MEDIUM, no_wait_after=True)
    page.wait_for_timeout(300)
    assert page.evaluate("() => window.__loomPwned") is None
    assert approve.is_enabled()


def assert_saved_html_inert(path: Path) -> None:
    """Every ``text/html`` output in the saved file is inert (after the tables' stylesheet),
    and no output holds the model's text as markdown but the control's."""
    import nbformat

    from loom_nb.notebook._html import TABLE_STYLE
    from tests.notebook.hostile import problems

    saved = nbformat.read(path, as_version=4)
    htmls = []
    for c in saved.cells:
        for out in c.get("outputs", []):
            data = out.get("data", {})
            assert "text/markdown" not in data
            if "text/html" in data:
                htmls.append(data["text/html"])
    assert len(htmls) >= 3  # the run's view, the static form, the chat
    for body in htmls:
        assert problems(body.removeprefix(TABLE_STYLE)) == [], body[:300]


def test_hostile_replies_run_nothing_and_the_write_waits(
    lab: LabServer, page: Any, tmp_path: Path
) -> None:
    root = lab.root
    cells = [textwrap.dedent(s).strip() for s in (SETUP, ASK, CONTROL, STATIC, CHECK)]
    write_notebook(root / "inert.ipynb", cells)
    open_notebook(page, lab, "inert.ipynb")
    guard(page)
    watch_stream(page)

    # The live run, streamed: the card waits; the control ran, the views did not.
    run_all(page, len(cells))
    live = cell(page, 1).locator(".loom-thread")
    live.locator(".loom-approval").wait_for(timeout=MEDIUM)
    controls_ran(page)
    print("ran when shown the unsafe way:", sorted(set(page.evaluate("() => __loomControl"))))
    seen = streamed_texts(page)
    assert len([t for t in seen if "onerror" in t]) > 3, seen[:5]  # seen growing
    assert "save_note" in live.locator(".loom-approval").inner_text()
    assert live.locator(".loom-frame table tbody tr").count() == 2
    assert live.locator(".loom-error").count() >= 1  # the failed call, its hostile error
    assert_inert(page, root, live)
    static = cell(page, 3).locator(".loom-thread-static")
    assert "undecided when this output was saved" in static.inner_text()
    static.locator("a").first.wait_for(timeout=MEDIUM)
    for i in range(static.locator("a").count()):  # the model's links, typeset math included
        static.locator("a").nth(i).click(timeout=MEDIUM, no_wait_after=True)
    page.wait_for_timeout(300)
    assert page.evaluate("() => window.__loomPwned") is None
    assert "written: False pwned: False" in cell_output_text(page, 4)
    thread_id = live.locator(".loom-thread-id").inner_text().strip()
    screenshot(page, "browser-inert-live", cell(page, 1))

    # The chat: another thread, asked from its input box.
    insert_cell(page, len(cells), "%loom scribe")
    run_cell(page, len(cells))
    wait_cell_done(page, len(cells))
    chat = cell(page, len(cells)).locator(".loom-chat").first
    box = chat.locator(".loom-chat-input textarea")
    box.fill("Summarise the notes, then save the summary.")
    box.press("Enter")
    chat.locator(".loom-approval").wait_for(timeout=MEDIUM)
    page.wait_for_timeout(1000)
    assert_inert(page, root, chat)
    screenshot(page, "browser-inert-chat", chat)

    # Saved and opened again (the kernel lives on: widgets come back from it, the static
    # form from the file, both trusted).
    command(page, "docmanager:save")
    page.wait_for_function(
        "() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=MEDIUM
    )
    assert_saved_html_inert(root / "inert.ipynb")
    open_notebook(page, lab, "inert.ipynb")
    guard(page)
    reopened = cell(page, 1).locator(".loom-thread")
    reopened.locator(".loom-approval").wait_for(timeout=MEDIUM)
    controls_ran(page)
    assert_inert(page, root, reopened)
    saved_card = cell(page, 3).locator(".loom-thread-static").inner_text()
    assert "undecided when this output was saved" in saved_card

    # Restarted: the thread comes back from SQLite, drawn whole, its card live again.
    n = len(cells) + 1
    restart_kernel(page)
    page.evaluate("() => { window.__loomControl = []; }")  # the control runs again below
    insert_cell(page, n, f"%loom resume {thread_id}")
    insert_cell(page, n + 1, f"%loom show {thread_id}")
    for index in (0, 2, n, n + 1):
        run_cell(page, index)
        wait_cell_done(page, index)
    resumed = cell(page, n).locator(".loom-thread")
    resumed.locator(".loom-history").wait_for(timeout=MEDIUM)
    controls_ran(page)
    assert_inert(page, root, resumed)
    shown = cell(page, n + 1).locator(".loom-thread")
    assert "onerror=" in shown.locator(".loom-history").inner_text()
    screenshot(page, "browser-inert-resumed", cell(page, n))

    # What the store holds: both writes wait, neither was decided.
    from loom_nb.sqlite import sqlite_store

    kept = sqlite_store(root / "inert.db")
    try:
        threads = [kept.load(i.id) for i in kept.list(limit=10)]
    finally:
        kept.close()
    assert len(threads) == 2
    assert all([p.state for p in t.pending] == ["pending"] for t in threads)
    assert not (root / "written.txt").exists() and not (root / "pwned.txt").exists()
