"""End to end in a real browser: JupyterLab 4 (and, where a test takes ``frontend``, Notebook 7
as well), Debian's chromium driven by Playwright.

What a person sees in the DOM, and what the kernel holds after their clicks.
"""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from tests.notebook.browser import fixtures
from tests.notebook.browser.lab import REPO_ROOT, LabServer
from tests.notebook.browser.page import (
    MEDIUM,
    cell,
    cell_output_text,
    command,
    expect_text,
    insert_cell,
    open_notebook,
    restart_kernel,
    run_all,
    run_cell,
    screenshot,
    streamed_texts,
    wait_cell_done,
    wait_cells_done,
    wait_kernel_idle,
    watch_stream,
    write_notebook,
)
from tests.notebook.browser.steps import Ask, Frontend, approve_the_write, run_to_the_card

# The harness's fixtures: one JupyterLab for this module, a fresh chromium page per test; for
# the tests run in each frontend, one Notebook 7 too, and a page on the frontend's server.
lab = fixtures.lab
notebook7 = fixtures.notebook7
chromium = fixtures.chromium
page = fixtures.page
frontend = fixtures.frontend
server = fixtures.server
frontend_page = fixtures.frontend_page

pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.timeout(900)]


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


SETUP = """
import asyncio
import pandas as pd
from loom_nb import FunctionModel, Reply, define_agent, tool
from loom_nb.sqlite import sqlite_store

%load_ext loom_nb

ORDERS = pd.DataFrame({
    "id": [101, 102, 103],
    "customer": ["Ada", "Grace", "Linus"],
    "total": [120.0, 80.5, 310.25],
    "status": ["open", "open", "shipped"],
})

@tool
def open_orders() -> pd.DataFrame:
    "Orders that are still open."
    return ORDERS[ORDERS.status == "open"].reset_index(drop=True)

@tool(needs_approval=True)
def add_order(customer: str, total: float) -> dict:
    "Add an open order."
    global ORDERS
    new_id = int(ORDERS.id.max()) + 1
    row = {"id": new_id, "customer": customer, "total": total, "status": "open"}
    ORDERS = pd.concat([ORDERS, pd.DataFrame([row])], ignore_index=True)
    return row

async def script(request):
    "A test model that answers from the thread's state, so it works after a restart too."
    last = request.messages[-1]
    done = [r.name for r in last.tool_results]
    if last.role == "user":
        reply = Reply("Let me look at the open orders.", tool_calls=[("open_orders", {})])
    elif "open_orders" in done:
        reply = Reply(
            "Two orders are still open: 101 for Ada and 102 for Grace. "
            "Now I will add the order for Hopper.",
            tool_calls=[("add_order", {"customer": "Hopper", "total": 42.5})],
        )
    else:
        reply = Reply("Done: order 104 for Hopper is saved and open.")
    for event in reply.events():
        await asyncio.sleep(0.05)  # streams word by word, like a model
        yield event

model = FunctionModel(script)
analyst = define_agent(
    name="analyst", model=model, tools=[open_orders, add_order], store=sqlite_store("loom.db")
)
"""

ASK = """
%%loom analyst --new -o open_df
Which orders are still open? Then add an order for Hopper, total 42.5.
"""

KERNEL_CHECK = """
print("rows in open_df:", len(open_df))
print("Hopper written:", (ORDERS.customer == "Hopper").any())
"""

WRITTEN = """
print("Hopper written:", (ORDERS.customer == "Hopper").any())
"""


ORDERS_ASK = Ask(
    cells=_cells(SETUP, ASK, KERNEL_CHECK),
    question="Which orders are still open?",
    answer="Two orders are still open: 101 for Ada and 102 for Grace.",
    later="Hopper",
    rows=["Ada", "Grace"],
    left_out="Linus",
    card=["add_order", "Hopper", "42.5"],
    unwritten="Hopper written: False",
    written=["Hopper written: True", "rows in open_df: 2"],
    done="Done: order 104 for Hopper is saved",
)


def test_agent_run_approve_restart_resume(
    frontend: Frontend, server: LabServer, frontend_page: Any
) -> None:
    """A person runs a notebook (JupyterLab by its command, Notebook 7 from Run > Run All
    Cells): sees the streamed answer and the table, approves the write, sees its outcome; the
    kernel holds the data; after a restart the thread comes back whole."""
    page = frontend_page
    cells, answer = ORDERS_ASK.cells, ORDERS_ASK.answer
    thread = run_to_the_card(page, server, frontend, ORDERS_ASK, "agent.ipynb")
    expect_text(thread.locator(".loom-tool-call").first, "open_orders")
    thread_id = thread.locator(".loom-thread-id").inner_text().strip()
    assert thread_id
    approve_the_write(page, frontend, ORDERS_ASK, thread)

    # Restart: nothing in memory; the thread comes back from SQLite, whole.
    resumed = restart_and_resume(page, len(cells), thread_id)
    expect_text(resumed.locator(".loom-user"), "Which orders are still open?")
    texts = resumed.locator(".loom-assistant")
    expect_text(texts.last, "Done: order 104 for Hopper is saved")
    assert texts.count() == 3
    expect_text(texts.nth(0), "Let me look at the open orders.")
    assert answer in texts.nth(1).inner_text()
    assert resumed.locator(".loom-frame table tbody tr").count() == 2
    calls = resumed.locator(".loom-tool-call")
    assert calls.count() == 2
    # The decided write: no buttons to click again, and its result says it was approved.
    assert resumed.locator(".loom-approve").count() == 0
    write_call = calls.nth(1)
    write_call.locator("summary").first.click()  # the saved thread folds calls in <details>
    expect_text(write_call, "approved")
    expect_text(write_call, "Hopper")
    screenshot(page, f"{frontend.name}-agent-resumed", cell(page, len(cells)))


def test_pending_approval_survives_a_restart(lab: LabServer, page: Any) -> None:
    """The run stops at the write; nobody clicks; the kernel restarts. ``%loom resume``
    shows the card again with live buttons, and Approve then runs the write in the new
    kernel and finishes the run."""
    cells = _cells(SETUP, ASK, WRITTEN)
    write_notebook(lab.root / "pending.ipynb", cells)
    open_notebook(page, lab, "pending.ipynb")
    run_all(page, len(cells))
    thread = cell(page, 1).locator(".loom-thread")
    expect_text(thread.locator(".loom-approval"), "add_order")
    thread_id = thread.locator(".loom-thread-id").inner_text().strip()
    assert "Hopper written: False" in cell_output_text(page, 2)

    resumed = restart_and_resume(page, len(cells), thread_id)
    expect_text(resumed.locator(".loom-user"), "Which orders are still open?")
    assert resumed.locator(".loom-frame table tbody tr").count() == 2
    card = resumed.locator(".loom-approval")
    assert card.count() == 1
    expect_text(card, "Hopper")
    expect_text(card, "42.5")
    approve = card.locator("button.loom-approve")
    assert approve.is_enabled()
    assert resumed.locator(".loom-assistant").count() == 2
    screenshot(page, "browser-pending-after-restart", cell(page, len(cells)))

    approve.click()
    expect_text(card.locator(".loom-decision"), "Approved")
    expect_text(card.locator(".loom-decision"), "done")
    expect_text(resumed.locator(".loom-assistant").last, "Done: order 104 for Hopper is saved")
    assert approve.is_disabled()
    screenshot(page, "browser-pending-approved-after-restart", cell(page, len(cells)))

    run_cell(page, 2)  # cleared by the restart: it ran in the old kernel only
    wait_cell_done(page, 2)
    assert "Hopper written: True" in cell_output_text(page, 2)


def test_chat_widget_send_and_approve(lab: LabServer, page: Any) -> None:
    """``%loom analyst`` opens the chat: a person types, clicks Send, watches the answer
    stream in while the kernel stays free for other cells, and approves the write."""
    cells = _cells(SETUP, "%loom analyst", WRITTEN)
    write_notebook(lab.root / "chat.ipynb", cells)
    open_notebook(page, lab, "chat.ipynb")
    watch_stream(page)
    run_all(page, len(cells))
    chat = cell(page, 1).locator(".loom-chat").first
    box = chat.locator(".loom-chat-input textarea")
    box.fill("Which orders are still open?")
    box.press("Shift+Enter")  # a new line, not a send
    box.type("Then add an order for Hopper, total 42.5.")
    assert box.input_value() == (
        "Which orders are still open?\nThen add an order for Hopper, total 42.5."
    )
    send = chat.locator("button.loom-send")
    box.press("Enter")  # sends
    thread = chat.locator(".loom-thread")
    # The whole text typed before Enter reaches the agent, the last keystrokes included.
    expect_text(thread.locator(".loom-user"), "Then add an order for Hopper, total 42.5.")
    expect_text(thread.locator(".loom-assistant").nth(1), "Two orders are still open")
    card = thread.locator(".loom-approval")
    expect_text(card, "add_order")
    assert thread.locator(".loom-frame table tbody tr").count() == 2
    from playwright.sync_api import expect

    expect(box).to_have_value("", timeout=MEDIUM)  # cleared by the kernel's reply to Send
    seen = streamed_texts(page)
    assert [t for t in seen if "Two orders" in t and "Hopper" not in t], seen[:10]

    # The run stopped at the approval and the kernel is free: another cell runs now.
    first = wait_cell_done(page, 2)
    run_cell(page, 2)
    wait_cell_done(page, 2, after=first)
    assert "Hopper written: False" in cell_output_text(page, 2)

    card.locator("button.loom-approve").click()
    expect_text(card.locator(".loom-decision"), "done")
    expect_text(thread.locator(".loom-assistant").last, "Done: order 104 for Hopper is saved")
    assert send.is_enabled()
    screenshot(page, "browser-chat-approved", chat)
    second = wait_cell_done(page, 2, after=first)
    run_cell(page, 2)
    wait_cell_done(page, 2, after=second)
    assert "Hopper written: True" in cell_output_text(page, 2)

    # Typed and sent with the mouse: the text reaches the kernel before the click does.
    box.fill("And which orders are closed?")
    send.click()
    expect_text(thread.locator(".loom-user").last, "And which orders are closed?")
    expect(box).to_have_value("", timeout=MEDIUM)


def test_chat_sends_all_that_was_typed_while_the_kernel_was_busy(lab: LabServer, page: Any) -> None:
    """A person types into the chat while another cell runs, and presses Enter: once the
    kernel is free the agent gets the whole text, not the first keystrokes (ipywidgets holds
    back a busy model's updates but sends a click at once)."""
    cells = _cells(SETUP, "%loom analyst", "import time; time.sleep(4)")
    write_notebook(lab.root / "chat-busy.ipynb", cells)
    open_notebook(page, lab, "chat-busy.ipynb")
    run_all(page, len(cells))
    first = wait_cell_done(page, 2)
    chat = cell(page, 1).locator(".loom-chat").first
    box = chat.locator(".loom-chat-input textarea")
    run_cell(page, 2)  # the kernel sleeps 4 s
    page.wait_for_timeout(500)
    box.type("Which orders are still open?", delay=20)
    box.press("Enter")
    wait_cell_done(page, 2, after=first)
    thread = chat.locator(".loom-thread")
    expect_text(thread.locator(".loom-user"), "Which orders are still open?")
    expect_text(thread.locator(".loom-assistant").nth(1), "Two orders are still open")
    from playwright.sync_api import expect

    expect(box).to_have_value("", timeout=MEDIUM)


def test_chat_widget_is_shown_once(lab: LabServer, page: Any) -> None:
    """``%loom analyst`` as a cell's last line shows one chat, not a mirrored second one."""
    cells = _cells(SETUP, "%loom analyst")
    write_notebook(lab.root / "chat-once.ipynb", cells)
    open_notebook(page, lab, "chat-once.ipynb")
    run_all(page, len(cells))
    shown = cell(page, 1)
    shown.locator(".loom-chat").first.wait_for(timeout=MEDIUM)
    wait_kernel_idle(page)  # a mirrored copy would come with the cell's result, after it
    # What a person sees: one box to type in and one Send button, and no Out[...] below them
    assert shown.locator(".loom-chat-input textarea:visible").count() == 1
    assert shown.locator("button.loom-send:visible").count() == 1
    assert shown.locator(".jp-OutputArea-executeResult").count() == 0


SECOND_ASK = """
%%loom analyst
And which are open now? Add Hopper again.
"""


def test_a_second_cell_says_its_own_question_and_its_card_reads_in_words(
    lab: LabServer, page: Any
) -> None:
    """Two ``%%loom`` cells on one thread: each header says what its cell asked, and the
    second cell's card reads as a sentence with its values in words (no JSON, no call id)."""
    cells = _cells(SETUP, ASK)
    write_notebook(lab.root / "second-cell.ipynb", cells)
    open_notebook(page, lab, "second-cell.ipynb")
    run_all(page, len(cells))
    first = cell(page, 1).locator(".loom-thread")
    first.locator(".loom-approval button.loom-approve").click()
    expect_text(first.locator(".loom-assistant").last, "Done: order 104 for Hopper is saved")

    insert_cell(page, 2, SECOND_ASK.strip())
    run_cell(page, 2)
    second = cell(page, 2).locator(".loom-thread")
    card = second.locator(".loom-approval")
    expect_text(card, "add_order")
    header = second.locator(".loom-thread-header").inner_text()
    assert "And which are open now?" in header and "Which orders are still open?" not in header
    expect_text(first.locator(".loom-thread-header"), "Which orders are still open?")
    said = " ".join(card.inner_text().split())
    assert said.startswith("add_order waits for your approval"), said
    assert "Customer: Hopper" in said and "Total: 42.5" in said
    assert '"' not in said and "call_" not in said and "{" not in said
    screenshot(page, "browser-second-cell-card", cell(page, 2))


LONG_THREAD = """
import pandas as pd
from loom_nb import Message, ReplayModel, TextPart, Thread, ToolCall, ToolResult, define_agent
from loom_nb.sqlite import sqlite_store

%load_ext loom_nb

store = sqlite_store("long.db")
analyst = define_agent(name="analyst", model=ReplayModel([]), store=store)
long = Thread(id="long-analysis-thread", agent="analyst", title="A long analysis")
store.save_thread(long)
for i in range(250):  # 1,000 messages: ask, call, a 50-row frame, answer
    frame = pd.DataFrame({"id": range(50), "total": [i + r / 4 for r in range(50)]})
    call = ToolCall(f"call_{i}", "orders_select", {"round": i})
    for m in (
        Message.user(f"Round {i}: which orders are open?"),
        Message("assistant", [TextPart(f"Querying round {i}."), call]),
        Message("tool", [ToolResult(call.id, call.name, "50 rows", frame)]),
        Message.assistant(f"Round {i}: 50 open orders."),
    ):
        long.messages.append(m)
        store.append(long, m)
store.save_thread(long)
"""


def test_long_thread_resumes_whole(lab: LabServer, page: Any) -> None:
    """A saved thread of 1,000 messages comes back whole in JupyterLab's default settings."""
    from playwright.sync_api import expect

    cells = _cells(LONG_THREAD, "%loom resume long-analysis-thread")
    write_notebook(lab.root / "long.ipynb", cells)
    open_notebook(page, lab, "long.ipynb")
    run_all(page, len(cells))
    shown = cell(page, 1).locator(".loom-thread")
    expect(shown.locator(".loom-assistant")).to_have_count(500, timeout=MEDIUM)
    expect_text(shown.locator(".loom-assistant").last, "Round 249: 50 open orders.")
    assert "IOPub message rate exceeded" not in cell_output_text(page, 1)


def test_rerunning_the_defining_cell_keeps_working(lab: LabServer, page: Any) -> None:
    """The cell defining the agents runs again; the next ``%%loom`` continues the thread the
    file store kept, and for the memory store (empty again) starts one and says why."""
    setup = _cells(
        """
        from loom_nb import FunctionModel, define_agent, memory_store
        from loom_nb.sqlite import sqlite_store
        %load_ext loom_nb

        def count(request):
            "Answers with how many messages of the user the thread holds."
            return f"{sum(m.role == 'user' for m in request.messages)} from you so far."

        # (counts of the thread, not of any result: no number marks to read past)
        kept = define_agent(name="kept", model=FunctionModel(count),
                            store=sqlite_store("rerun.db"), check_numbers="off")
        scratch = define_agent(name="scratch", model=FunctionModel(count),
                               store=memory_store(), check_numbers="off")
        """
    )[0]
    cells = [setup, "%%loom kept\nHello", "%%loom scratch\nHello"]
    write_notebook(lab.root / "rerun.ipynb", cells)
    open_notebook(page, lab, "rerun.ipynb")
    run_all(page, len(cells))
    first_kept = thread_id_in(cell(page, 1))
    first_scratch = thread_id_in(cell(page, 2))
    done = wait_cell_done(page, 0)
    run_cell(page, 0)
    wait_cell_done(page, 0, after=done)
    insert_cell(page, 3, "%%loom kept\nAgain")
    insert_cell(page, 4, "%%loom scratch\nAgain")
    for index in (3, 4):
        run_cell(page, index)
        wait_cell_done(page, index)
    expect_text(cell(page, 3).locator(".loom-assistant").last, "2 from you so far.")
    assert thread_id_in(cell(page, 3)) == first_kept
    expect_text(cell(page, 4).locator(".loom-assistant").last, "1 from you so far.")
    note = f"ℹ scratch's thread {first_scratch} is no longer in its store"
    assert note in cell_output_text(page, 4) and "starting a new thread" in cell_output_text(
        page, 4
    )
    assert thread_id_in(cell(page, 4)) != first_scratch
    screenshot(page, "browser-rerun-defining-cell", cell(page, 4))


def test_old_cards_after_a_restart_explain_and_the_saved_notebook_reads_without_widgets(
    frontend: Frontend, server: LabServer, frontend_page: Any, tmp_path: Any
) -> None:
    """Kernel → Restart with outputs kept: the old card shows how to decide instead of
    buttons, and clicking it runs nothing. The notebook as saved reads without widgets: as
    nbconvert HTML (no kernel) and opened untrusted in the frontend, with the thread, the
    table and the card's arguments, and no button."""
    page, lab = frontend_page, server
    cells = _cells(SETUP, ASK, WRITTEN)
    write_notebook(lab.root / "old-card.ipynb", cells)
    open_notebook(page, lab, "old-card.ipynb")
    frontend.run_all(page, len(cells))
    card = cell(page, 1).locator(".loom-approval")
    expect_text(card, "add_order")
    assert card.locator("button.loom-approve").is_visible()
    assert not card.locator(".loom-offline").is_visible()
    assert not cell(page, 1).locator(".loom-static").first.is_visible()  # the widget shows it
    command(page, "docmanager:save")
    page.wait_for_function(
        "() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=MEDIUM
    )

    page.evaluate(
        "async () => { await window.jupyterapp.shell.currentWidget.sessionContext"
        ".session.kernel.restart(); }"
    )
    wait_kernel_idle(page)
    page.locator(".loom-approval.jupyter-widgets-disconnected").wait_for(timeout=MEDIUM)
    offline = card.locator(".loom-offline")
    expect_text(offline, "waiting for approval — run %loom approvals to decide")
    assert not card.locator("button.loom-approve").is_visible()
    card.click()  # where a person would try: nothing to press, nothing runs
    expect_text(cell(page, 1).locator(".loom-gone"), "the kernel that drew it is gone")
    icon = page.evaluate(
        """() => getComputedStyle(document.querySelector(
            '.loom-thread .jupyter-widgets-disconnected'), '::before').content"""
    )
    assert icon in ("none", "normal"), icon  # no broken-link icon on every widget
    screenshot(page, f"{frontend.name}-old-card-after-restart", cell(page, 1))
    run_cell(page, 0)
    wait_cell_done(page, 0)
    run_cell(page, 2)
    wait_cell_done(page, 2)
    expect_text(cell(page, 2).locator(".jp-Cell-outputArea"), "Hopper written: False")

    # The notebook as saved: nbconvert's HTML, opened with no kernel and no network.
    import nbformat
    from nbconvert import HTMLExporter

    saved = nbformat.read(lab.root / "old-card.ipynb", as_version=4)
    assert "widgets" not in saved.metadata  # JupyterLab saves no widget state by default
    html, _ = HTMLExporter(sanitize_html=True).from_notebook_node(saved)
    exported = tmp_path / "old-card.html"
    exported.write_text(html)
    static = page.context.new_page()
    try:
        static.goto(exported.as_uri(), wait_until="domcontentloaded", timeout=MEDIUM)
        text = static.locator("body").inner_text()
        for seen in ("Which orders are still open?", "Two orders are still open", "Grace"):
            assert seen in text
        assert "Hopper" in text and "42.5" in text  # the pending card's arguments
        assert "Decided after this output was saved? See %loom show." in text
        assert static.locator("button").count() == 0 and "ThreadView(" not in text
        screenshot(static, f"{frontend.name}-saved-notebook-as-html")
    finally:
        static.close()

    # Opened untrusted (someone else's copy: its content has no signature here), the frontend
    # draws the static HTML, not the widget. (A trusted copy would try the widget.)
    saved.metadata["shared_by"] = "a colleague"
    (lab.root / "untrusted.ipynb").write_text(nbformat.writes(saved))
    open_notebook(page, lab, "untrusted.ipynb")
    shown = cell(page, 1).locator(".jp-Cell-outputArea")
    expect_text(shown, "To decide it, run %loom approvals.")
    expect_text(shown, "Hopper")
    expect_text(shown, "Grace")
    assert shown.locator(".loom-thread").count() == 0 and shown.locator("button").count() == 0
    # the frame's two rows, as aligned text (a table would not survive nbconvert's sanitizer)
    [frame] = [t for t in shown.locator("pre.loom-table-text").all_inner_texts() if "Grace" in t]
    assert len(frame.splitlines()) == 3 and "Ada" in frame  # its header and two rows
    screenshot(page, f"{frontend.name}-untrusted-notebook", cell(page, 1))


SLOW = """
import asyncio
from loom_nb import FunctionModel, TextDelta, define_agent
%load_ext loom_nb

async def slowly(request):
    for i in range(200):
        await asyncio.sleep(0.1)
        yield TextDelta(f"word{i} ")

writer = define_agent(name="writer", model=FunctionModel(slowly))
"""


def test_interrupt_during_a_run_shows_one_line(lab: LabServer, page: Any) -> None:
    """Kernel → Interrupt while the answer streams: one line says what stopped and what was
    kept, no traceback; the next ``%%loom`` continues the same thread."""
    cells = _cells(SLOW, "%%loom writer\nWrite a long text.")
    write_notebook(lab.root / "interrupt.ipynb", cells)
    open_notebook(page, lab, "interrupt.ipynb")
    command(page, "notebook:run-all-cells")
    expect_text(cell(page, 1).locator(".loom-assistant"), "word3")
    command(page, "notebook:interrupt-kernel")
    wait_cells_done(page, len(cells))
    out = cell(page, 1).locator(".jp-Cell-outputArea")
    error = out.locator("[data-mime-type='application/vnd.jupyter.stderr']").last
    expect_text(error, "KeyboardInterrupt: writer's run was interrupted; 1 completed message")
    text = error.inner_text().strip()
    assert "\n" not in text and "Traceback" not in out.inner_text(), text
    thread_id = thread_id_in(cell(page, 1))
    assert f"saved in thread {thread_id}" in text
    # said once: the view does not repeat it, and its static form (for saved copies) is hidden
    # where the widget is drawn, so the thread shows once too
    shown = out.inner_text()
    assert shown.count("run was interrupted") == 1, shown
    # the header says this cell's question, the thread its message: twice, not four times
    assert shown.count("Write a long text.") == 2, shown
    assert cell(page, 1).locator(".loom-static").count() >= 1
    assert not cell(page, 1).locator(".loom-static").first.is_visible()
    screenshot(page, "browser-interrupted-run", cell(page, 1))


def thread_id_in(shown: Any) -> str:
    """The thread id a view's header shows."""
    found = shown.locator(".loom-thread-id").first
    found.wait_for(timeout=MEDIUM)
    return str(found.inner_text()).strip()


def restart_and_resume(page: Any, n_cells: int, thread_id: str) -> Any:
    """Restart the kernel, re-run the setup cell, then ``%loom resume`` in a new last cell;
    returns the resumed thread view."""
    restart_kernel(page)
    insert_cell(page, n_cells, f"%loom resume {thread_id}")
    run_cell(page, 0)
    wait_cell_done(page, 0)
    run_cell(page, n_cells)
    wait_cell_done(page, n_cells)
    return cell(page, n_cells).locator(".loom-thread")


CHART_SETUP = """
import pandas as pd
from loom_nb import FunctionModel, Reply, define_agent
from loom_nb.charts import chart_tools
from loom_nb.frames import frame_tools
from loom_nb.sqlite import sqlite_store

%load_ext loom_nb

orders = pd.DataFrame({
    "status": ["open", "open", "open", "shipped", "open"],
    "total": [120.0, 310.0, 150.0, 500.0, 40.0],
    "created_at": pd.to_datetime(["2026-01-05", "2026-01-07", "2026-01-14", "2026-01-06",
                                  "2026-01-20"]),
})

def script(request):
    "The design example, scripted: a weekly aggregate of open orders above 100, then a chart."
    last = request.messages[-1]
    if last.role == "user":
        return Reply("Totalling by week.", [("frames_aggregate", {
            "table": "orders",
            "filters": [{"column": "status", "op": "eq", "value": "open"},
                        {"column": "total", "op": "gt", "value": 100}],
            "group_by": [{"column": "created_at", "bucket": "week"}],
            "aggregates": [{"fn": "sum", "column": "total"}],
        })])
    weekly = next(r for m in request.messages for r in m.tool_results
                  if r.name == "frames_aggregate")
    if last.tool_results[-1].name == "frames_aggregate":
        return Reply("Now the chart.", [("chart", {
            "result": weekly.call_id, "kind": "bar", "x": "week_created_at", "y": "sum_total",
        })])
    return "Two weeks have open orders above 100."

explorer = define_agent(
    name="explorer", model=FunctionModel(script), store=sqlite_store("loom.db"),
    connectors=[frame_tools({"orders": {"frame": orders}}), chart_tools()],
)
"""

CHART_ASK = """
%%loom explorer --new
Which orders above 100 are still open? Plot them by week.
"""


def test_the_design_example_draws_its_chart_and_draws_it_again_after_a_restart(
    lab: LabServer, page: Any
) -> None:
    """ "Plot them by week": the bar chart is an image in the thread a person sees, and after
    Kernel > Restart and ``%loom resume`` it is drawn again from the saved spec."""
    cells = _cells(CHART_SETUP, CHART_ASK)
    write_notebook(lab.root / "chart.ipynb", cells)
    open_notebook(page, lab, "chart.ipynb")
    run_all(page, len(cells))

    thread = cell(page, 1).locator(".loom-thread")
    expect_text(thread.locator(".loom-assistant").last, "Two weeks have open orders above 100.")
    image = thread.locator("img.loom-chart-image")
    image.wait_for(timeout=MEDIUM)
    assert image.count() == 1
    assert (image.get_attribute("src") or "").startswith("data:image/png;base64,")
    # drawn, not a broken image: the browser decoded a picture with a real size
    assert page.evaluate("(img) => img.naturalWidth", image.element_handle()) > 100
    screenshot(page, "browser-chart", cell(page, 1))
    thread_id = thread.locator(".loom-thread-id").inner_text().strip()

    resumed = restart_and_resume(page, len(cells), thread_id)
    again = resumed.locator("img.loom-chart-image")
    again.wait_for(timeout=MEDIUM)
    assert again.count() == 1
    assert page.evaluate("(img) => img.naturalWidth", again.element_handle()) > 100


def test_quickstart_click_on_the_resumed_card(lab: LabServer, page: Any) -> None:
    """notebooks/01-quickstart.ipynb as its text says: run it to the restart, restart the
    kernel, run on to ``%loom resume``, and click Approve on the resumed card, as it invites.
    The next cell (the line-magic approval) then says the card decided it instead of failing,
    and order 7 is cancelled."""
    import nbformat

    nb = nbformat.read(REPO_ROOT / "notebooks" / "01-quickstart.ipynb", as_version=4)
    # run_cell takes the index among all cells; cell() and wait_cell_done count code cells
    at = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    restart = next(
        sum(c.cell_type == "code" for c in nb.cells[:i])
        for i, c in enumerate(nb.cells)
        if "restart-kernel" in c.metadata.get("tags", [])
    )
    resume = next(n for n, i in enumerate(at) if "%loom resume" in nb.cells[i].source)
    folder = lab.root / "quickstart"  # its own .loom/loom.db
    folder.mkdir(exist_ok=True)
    nbformat.write(nb, folder / "01-quickstart.ipynb")
    open_notebook(page, lab, "quickstart/01-quickstart.ipynb")

    def run(code_index: int) -> str:
        run_cell(page, at[code_index])
        wait_cell_done(page, code_index)
        return cell_output_text(page, code_index)

    for index in range(restart):
        run(index)
    restart_kernel(page)
    for index in range(restart, resume + 1):
        run(index)

    resumed = cell(page, resume).locator(".loom-thread")
    approve = resumed.locator("button.loom-approve")
    assert approve.count() == 1  # the decided writes have no buttons
    approve.click()
    expect_text(resumed.locator(".loom-decision").last, "Approved")
    assert run(resume + 1).strip() == "Decided on the card above."
    assert "cancelled" in run(resume + 2)
    screenshot(page, "browser-quickstart-resumed-card-clicked", cell(page, resume))
