"""A saved thread drawn as one block of HTML (what %loom resume / show displays)."""

from __future__ import annotations

import json
from html import escape as html_escape

import pandas as pd

from loom_nb import Message, TextPart, ToolCall, ToolResult
from loom_nb.frames import frame_tools
from loom_nb.notebook._calls import CallText
from loom_nb.notebook._html import PAGE_STYLE
from loom_nb.notebook.history import history_html
from tests.frames._orders import open_orders_over


def thread_messages() -> list[Message]:
    call = ToolCall("c1", "orders_select", {"table": "orders"})
    write = ToolCall("c2", "orders_update", {"values": {"status": "paid"}})
    return [
        Message.user("Which <b>orders</b> are open?"),
        Message("assistant", [TextPart("Let me **look**."), call, write]),
        Message(
            "tool",
            [
                ToolResult(
                    "c1",
                    "orders_select",
                    "2 rows",
                    pd.DataFrame({"id": [1, 2], "total": [5.0, 7.5]}),
                )
            ],
        ),
        Message(
            "tool",
            [
                ToolResult(
                    "c2",
                    "orders_update",
                    json.dumps({"error": "rejected"}),
                    is_error=True,
                    approval="rejected",
                )
            ],
        ),
        Message.assistant("Two are open. <img src=x onerror=alert(1)>"),
    ]


def test_every_message_is_drawn_with_its_class():
    html = history_html(thread_messages(), rows=10)
    assert html.count('class="loom-message loom-user"') == 1
    assert html.count('class="loom-message loom-assistant"') == 2
    assert "<strong>look</strong>" in html  # the assistant's markdown is rendered
    assert html.count('<details class="loom-tool-call') == 2  # calls fold, as in the live view
    assert "2 rows × 2 columns" in html and "<td>7.5</td>" in html
    assert 'class="loom-rejected"' in html and "nothing was run or written" in html
    # the result is folded under its call, with the decision on the fold; a tool without
    # words reads as its name and arguments
    fold = "orders_update · values: status = paid · rejected"
    update = html[html.index(fold) :]
    assert "what the model saw" in update
    assert html_escape(json.dumps({"error": "rejected"})) in update


def test_text_from_the_user_and_the_model_cannot_inject_html():
    html = history_html(thread_messages(), rows=10)
    assert "<b>orders</b>" not in html and "&lt;b&gt;orders&lt;/b&gt;" in html
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def test_tables_show_rows_rows_the_pandas_way_and_say_how_many_more():
    frame = pd.DataFrame({"id": range(100), "total": [r / 4 for r in range(100)]})
    html = history_html([Message("tool", [ToolResult("c", "t", "100 rows", frame)])], rows=3)
    assert "100 rows × 2 columns" in html and "… 97 more rows" in html
    assert "<td>2</td>" in html and "<td>3</td>" not in html
    # pandas' own markup (its index as row headers), numbers right-aligned, no scroll box
    assert '<table border="1" class="dataframe">' in html and "<th>2</th>" in html
    assert "text-align:right" in PAGE_STYLE and "max-height" not in html


def test_a_call_folds_to_its_query_in_words_and_unfolds_to_its_code_first():
    orders = pd.DataFrame({"id": [1, 2], "status": ["open", "paid"], "total": [150.0, 20.0]})
    tools = frame_tools({"orders": orders}).tools
    args = open_orders_over(100)
    messages = [
        Message("assistant", [ToolCall("c1", "frames_select", args)]),
        Message("tool", [ToolResult("c1", "frames_select", "MODEL SAW THIS", orders.head(1))]),
    ]
    html = history_html(messages, rows=10, calls=CallText(tools))
    fold = html_escape(
        "frames_select · orders · status = 'open' AND total > 100 · order by total desc"
    )
    assert f"<summary>{fold}</summary>" in html
    code, arguments, seen = (
        html.index('class="loom-code"'),
        html.index("<summary", html.index('class="loom-call-arguments"')),
        html.index("MODEL SAW THIS"),
    )
    assert code < arguments < seen  # the code first, then the raw arguments, then the text
    assert html_escape('orders[(orders["status"] == "open") & (orders["total"] > 100)]') in html
    assert html_escape('"op": "gt"') in html  # the raw arguments, as the model sent them


def test_a_saved_thread_is_drawn_decoding_only_the_rows_it_shows(tmp_path):
    from loom_nb import Thread
    from loom_nb.sqlite import sqlite_store

    big = pd.DataFrame({"id": range(500), "total": [i / 4 for i in range(500)]})
    odd_index = pd.DataFrame({"x": range(12)}, index=[*range(10), 40, 41])  # 0..9 at the top
    store = sqlite_store(tmp_path / "loom.db")
    thread = Thread(id="t", agent="a")
    store.save_thread(thread)
    for i, frame in enumerate([big, odd_index]):
        message = Message("tool", [ToolResult(f"c{i}", "orders_select", "rows", frame)])
        thread.messages.append(message)
        store.append(thread, message)
    loaded = store.load("t")
    store.close()
    html = history_html(loaded.messages, rows=3)
    results = [r for m in loaded.messages for r in m.tool_results]
    assert all("_raw" in r.__dict__ for r in results)  # still encoded: nothing decoded whole
    assert html == history_html(thread.messages, rows=3)  # the same drawing as the frames give
    assert "500 rows × 2 columns" in html and "… 497 more rows" in html
    assert "<th>40</th>" not in html and "<th>2</th>" in html
