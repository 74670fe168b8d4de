"""%%loom, widgets and approvals in real kernels (ipykernel 6.31, 7.3, 7.4) through nbclient.

Kernel-side ``button.click()`` runs the same on_click a browser click runs; the browser test
(test_browser.py) covers what the person sees.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.notebook.nb_kernels import Kernel, execute, printed, text_of, with_class

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

SETUP = """
%load_ext loom_nb
import pandas as pd
from loom_nb import define_agent, tool, ReplayModel, Reply
{store_import}

written = []

@tool
def orders(min_total: float) -> pd.DataFrame:
    "Orders above min_total."
    df = pd.DataFrame({{"id": [1, 2, 3], "total": [50.0, 150.0, 250.0]}})
    return df[df.total > min_total]

@tool(needs_approval=True, preview=lambda a: {{"rows": [{{"subject": a["subject"]}}]}})
def insert_ticket(subject: str) -> str:
    "Insert a ticket."
    written.append(subject)
    return f"ticket {{subject!r}} inserted"

model = ReplayModel({replies})
analyst = define_agent(name="analyst", model=model, tools=[orders, insert_ticket], store={store})
threshold = 100
"""

REPLIES = """[
    Reply("Looking at the orders.", [("orders", {"min_total": 100})]),
    "There are **2** orders above 100.",
    "Both are still open.",
    Reply("I will file a ticket.", [("insert_ticket", {"subject": "late orders"})]),
    "The ticket is filed.",
]"""


def _setup(store: str = "None", store_import: str = "", replies: str = REPLIES) -> str:
    return SETUP.format(store=store, store_import=store_import, replies=replies)


def test_run_all_then_click_approve(kernel: tuple[str, Path], tmp_path: Path) -> None:
    cells = [
        _setup(),
        "%%loom analyst -o big\nWhich orders are above {threshold}?",
        "%%loom analyst\nAre they open?",
        "print(type(big).__name__, list(big.id), len(analyst.threads()), "
        "len(analyst.threads()[0].__dict__) > 0)",
        "%%loom analyst\nFile a ticket about the late orders.",
        textwrap.dedent("""
            from loom_nb.notebook import session
            view = session().last_view
            card = view.cards[0]
            card.approve_button.click()
            card.approve_button.click()   # a double click must not run twice
            card.reject_button.click()
            result = view.wait(30)
            print(result.status, written, card.approve_button.disabled, card.reject_button.disabled)
            print(card.decision_label.value)
        """),
        "print(result.output, '|', result.thread.id == session().current['analyst'])",
        "model.add('Chat reply.')\n%loom analyst\nchat = session().last_chat",
        textwrap.dedent("""
            chat.input.value = "Anything else?"
            chat.send_button.click()
            reply = chat.wait(30)
            print(reply.output, reply.thread.id == result.thread.id, chat.input.value == "")
        """),
    ]
    nb = execute(cells, kernel, tmp_path)
    out = [text_of(c) for c in nb.cells]
    assert out[3].split() == ["DataFrame", "[2,", "3]", "1", "True"]
    assert "complete ['late orders'] True True" in out[5]
    assert "Approved" in out[5] and "done" in out[5]
    assert "The ticket is filed. | True" in out[6]
    assert out[8].strip() == "Chat reply. True True"
    assert with_class(nb, "loom-chat-input") and with_class(nb, "loom-send")
    # Stored widget state: what the cells drew while they ran.
    frames = with_class(nb, "loom-frame")
    assert len(frames) == 1 and "2 rows × 2 columns" in frames[0]["value"]  # the %%loom cell
    # the chat widget shows the saved thread whole, as one block of HTML
    [history] = with_class(nb, "loom-history")
    assert 'class="loom-frame"' in history["value"] and "2 rows × 2 columns" in history["value"]
    assert "Which orders are above 100?" in history["value"]
    users = [s["value"] for s in with_class(nb, "loom-user")]
    assert any("Which orders are above 100?" in u for u in users)
    texts = [s["value"] for s in with_class(nb, "loom-assistant")]
    answer = "<p>There are <strong>2</strong> orders above 100.</p>\n"
    # (the answer's numbers are traced: where its 2 came from folds under it)
    assert any(t.startswith(answer) and "loom-numbers" in t for t in texts), texts
    assert with_class(nb, "loom-approval") and with_class(nb, "loom-tool-call")


def test_restart_resumes_the_pending_card_and_approves(
    kernel: tuple[str, Path], tmp_path: Path
) -> None:
    db = str(tmp_path / "loom.db")
    store = f"sqlite_store({db!r})"
    store_import = "from loom_nb.sqlite import sqlite_store"
    first = execute(
        [
            _setup(
                store, store_import, '[Reply("Filing it.", [("insert_ticket", {"subject": "x"})])]'
            ),
            "%%loom analyst --result r\nFile a ticket.",
            "print(r.thread.id, r.status, written)",
        ],
        kernel,
        tmp_path,
    )
    thread_id, status, nothing = text_of(first.cells[2]).split()
    assert (status, nothing) == ("awaiting_approval", "[]")

    # A new kernel on the same file: the thread comes back whole, its card active.
    second = execute(
        [
            _setup(store, store_import, '["The ticket is filed."]'),
            f"%loom resume {thread_id}",
            textwrap.dedent("""
            from loom_nb.notebook import session
            view = session().last_view
            card = view.cards[0]
            print(card.approve_button.disabled, '"subject": "x"' in card.preview.value
                  or "<td>x</td>" in card.preview.value)
            card.approve_button.click()
            result = view.wait(30)
            print(result.status, written, result.output)
        """),
            "print(analyst.thread(result.thread.id).status)",
        ],
        kernel,
        tmp_path,
    )
    shown = second.cells[1]
    [history] = with_class(second, "loom-history")  # the saved thread, drawn as one block
    assert "File a ticket." in history["value"] and 'class="loom-tool-call"' in history["value"]
    assert with_class(second, "loom-approval")
    assert not shown.get("outputs") or "Error" not in text_of(shown)
    lines = text_of(second.cells[2]).splitlines()
    assert lines[0] == "False True"
    assert lines[1] == "complete ['x'] The ticket is filed."
    assert text_of(second.cells[3]).strip() == "complete"


def test_interrupt_keeps_what_completed_and_batching(
    kernel: tuple[str, Path], tmp_path: Path
) -> None:
    long_text = " ".join(f"w{i}" for i in range(2000))
    replies = f'[Reply("Fetching.", [("orders", {{"min_total": 0}})]), {long_text!r}]'
    k = Kernel(kernel, tmp_path)
    try:
        reply, out = k.run(
            _setup(replies=replies) + "\nmodel.delay = 0.01\n"
            "import ipykernel; print(ipykernel.__version__)"
        )
        assert reply["status"] == "ok"
        version = kernel[0].removeprefix("loom-ipykernel-").replace("-", ".")
        assert printed(out).startswith(version + ".")  # the kernelspec runs that ipykernel
        msg_id = k.send("%%loom analyst\nShow all orders.")

        def streaming(msg: dict[str, Any]) -> bool:  # the slow reply is under way
            return "w20 " in json.dumps(msg["content"])

        k.collect(msg_id, until=streaming)
        k.km.interrupt_kernel()
        messages = k.collect(msg_id)
        interrupted = k.reply(msg_id)
        # One line saying what stopped and what was kept; no traceback into loom_nb.
        assert interrupted["status"] == "error" and interrupted["ename"] == "RunInterrupted"
        [error] = [m["content"] for m in messages if m["msg_type"] == "error"]
        assert len(error["traceback"]) == 1
        assert error["traceback"][0].startswith(
            "KeyboardInterrupt: analyst's run was interrupted; 3 completed messages saved in "
            "thread "
        )

        reply, out = k.run(
            "from loom_nb.notebook import session\n"
            "t = analyst.thread(session().current['analyst'])\n"
            "print([m.role for m in t.messages], t.error)"
        )
        assert printed(out).strip() == (
            "['user', 'assistant', 'tool'] The run was interrupted; what completed is saved."
        )
        # The kernel is fine and %%loom goes on in the same thread.
        reply, out = k.run(
            f"model.delay = 0.0005\nmodel.add({long_text!r})\n"
            "%config LoomMagics.stream_interval = 0.1"
        )
        msg_id = k.send("%%loom analyst --result again\nTry again.")
        messages = k.collect(msg_id)
        assert k.reply(msg_id)["status"] == "ok"
        # the reply's widget, made during this run, and the updates of its text
        texts = {
            m["content"]["comm_id"]
            for m in messages
            if m["msg_type"] in ("comm_open", "comm_msg")
            and "loom-assistant" in m["content"]["data"].get("state", {}).get("_dom_classes", ())
        }
        updates = [
            m
            for m in messages
            if m["msg_type"] == "comm_msg"
            and m["content"]["comm_id"] in texts
            and "value" in m["content"]["data"].get("state", {})
        ]
        reply, out = k.run(
            "print(again.status, len(again.output.split()), session().last_view.stream_updates)"
        )
        status, words, flushes = printed(out).split()
        assert (status, words) == ("complete", "2000")
        # 2000 streamed words reach the frontend as a handful of batched updates.
        assert len(updates) == int(flushes) and 1 < len(updates) < 200
        print(f"comm messages for a 2000-word streamed reply: {len(updates)}")
    finally:
        k.close()


def test_failed_run_is_one_line_and_stops_run_all(kernel: tuple[str, Path], tmp_path: Path) -> None:
    k = Kernel(kernel, tmp_path)
    try:
        assert k.run(_setup(replies="[]"))[0]["status"] == "ok"
        reply, messages = k.run("%%loom analyst\nHello?")
        assert reply["status"] == "error" and reply["ename"] == "RunFailed"
        errors = [m["content"] for m in messages if m["msg_type"] == "error"]
        assert len(errors) == 1 and len(errors[0]["traceback"]) == 1
        assert "has no reply left" in errors[0]["traceback"][0]
        reply, messages = k.run(
            "from loom_nb.notebook import session\n"
            "v = session().last_view\n"
            "print(len(v.errors.children), 'loom-error' in "
            "v.errors.children[0]._dom_classes)"
        )
        assert printed(messages).split() == ["1", "True"]
        reply, messages = k.run("%%loom nobody\nHello?")
        assert reply["status"] == "error"
        assert "UsageError" in printed(messages) or any(
            "nobody" in json.dumps(m["content"]) for m in messages
        )
    finally:
        k.close()


def test_rerunning_the_defining_cell_continues_or_says_why(
    kernel: tuple[str, Path], tmp_path: Path
) -> None:
    """A defining cell run again: with a file store the next %%loom continues the thread; with
    the memory store (emptied by the new definition) it starts one and says why."""
    store = f"sqlite_store({str(tmp_path / 'loom.db')!r})"
    sqlite = _setup(store, "from loom_nb.sqlite import sqlite_store", '["One.", "Two."]')
    memory = _setup("memory_store()", "from loom_nb import memory_store", '["One.", "Two."]')
    show = "from loom_nb.notebook import session\nprint(session().current['analyst'])"
    cells = [
        *(sqlite, "%%loom analyst\nHi", show, sqlite, "%%loom analyst\nAgain", show),
        *(memory, "%%loom analyst\nHi", show, memory, "%%loom analyst\nAgain", show),
    ]
    nb = execute(cells, kernel, tmp_path)
    out = [text_of(c) for c in nb.cells]
    assert out[2] == out[5] and "no longer in its store" not in out[4]
    assert out[8] != out[11]
    note = f"ℹ analyst's thread {out[8].strip()} is no longer in its store (the agent was defined"
    assert note in out[10] and "starting a new thread." in out[10]


def test_an_executed_notebook_reads_as_html_without_a_kernel(
    kernel: tuple[str, Path], tmp_path: Path
) -> None:
    """Saved without widget state (as JupyterLab saves by default) and converted by nbconvert
    with its sanitizer on (as nbviewer and an untrusted notebook show it), the notebook shows
    the thread, the tables and the pending card's arguments, with no buttons."""
    from nbconvert import HTMLExporter

    nb = execute(
        [
            _setup(),
            "%%loom analyst\nWhich orders are above {threshold}?",
            "%%loom analyst\nAre they open?",
            "%%loom analyst\nFile a ticket about the late orders.",
        ],
        kernel,
        tmp_path,
        store_widget_state=False,
    )
    # The streamed reply's static form was sent again when the run ended: it is whole.
    [bundle] = [o["data"] for o in nb.cells[1].outputs if "text/html" in o.get("data", {})]
    assert "There are <strong>2</strong> orders above 100." in bundle["text/html"]
    assert "There are **2** orders above 100." in bundle["text/plain"]
    html, _ = HTMLExporter(sanitize_html=True).from_notebook_node(nb)
    assert "Which orders are above 100?" in html and "Both are still open." in html
    assert re.search(r"\n1 +2 +150\.0\n2 +3 +250\.0", html)  # the DataFrame's rows, as text
    assert "insert_ticket</b> waits for your approval" in html and "late orders" in html
    assert "Decided after this output was saved? See <code>%loom show</code>." in html
    assert "<button" not in html and "ThreadView(" not in html
