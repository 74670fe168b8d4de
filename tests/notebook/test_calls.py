"""A tool call in the live views: folded, the query in words; unfolded, its code first, then the
raw arguments and the exact text the model saw."""

from __future__ import annotations

import io

import pandas as pd

from loom_nb import Message, MessageAdded, ToolCall, ToolResult
from loom_nb.frames import frame_tools
from loom_nb.notebook.text import TextView
from loom_nb.notebook.widgets import ThreadView
from tests.frames._orders import open_orders_over

ORDERS = pd.DataFrame({"id": [1, 2], "status": ["open", "paid"], "total": [150.0, 20.0]})
TOOLS = frame_tools({"orders": ORDERS}).tools
ARGS = open_orders_over(100)
WORDS = "frames_select · orders · status = 'open' AND total > 100 · order by total desc"
CALL = Message("assistant", [ToolCall("c1", "frames_select", ARGS), ToolCall("c2", "ping", {})])
RESULT = Message(
    "tool",
    [
        ToolResult("c1", "frames_select", "THE MODEL'S TEXT", ORDERS.head(1)),
        ToolResult("c2", "ping", "pong"),
    ],
)


def test_the_widget_view_folds_a_call_to_words_and_shows_its_code_first() -> None:
    view = ThreadView(agent_name="analyst", tools=TOOLS)
    view.on_event(MessageAdded(CALL, "t1"))
    boxes = [w for w in view.body.children if "loom-tool-call" in w._dom_classes]
    assert [b.titles[0] for b in boxes] == [WORDS, "ping()"]
    body = boxes[0].children[0].value
    assert 'class="loom-code"' in body and 'sort_values("total"' in body
    assert body.index("loom-code") < body.index("loom-call-arguments")
    assert "THE MODEL" not in body  # no result yet
    assert 'class="loom-call-arguments" open' in boxes[1].children[0].value  # no code: open

    view.on_event(MessageAdded(RESULT, "t1"))
    body = boxes[0].children[0].value
    assert body.index("loom-call-arguments") < body.index("THE MODEL'S TEXT")
    assert boxes[0].titles == (WORDS,)


def test_an_approval_outcome_is_on_the_fold() -> None:
    view = ThreadView(agent_name="analyst", tools=TOOLS)
    view.on_event(MessageAdded(Message("assistant", [ToolCall("c9", "ping", {})]), "t1"))
    result = ToolResult("c9", "ping", "done", approval="approved")
    view.on_event(MessageAdded(Message("tool", [result]), "t1"))
    box = next(w for w in view.body.children if "loom-tool-call" in w._dom_classes)
    assert box.titles == ("ping() · approved",)


def test_the_text_view_prints_the_words_and_the_code() -> None:
    out = io.StringIO()
    view = TextView(title="analyst", out=out, tools=TOOLS)
    view.on_event(MessageAdded(CALL, "t1"))
    lines = out.getvalue().splitlines()
    assert lines[0] == f"  → {WORDS}"
    assert lines[1] == "      result = ("
    assert (
        '          .sort_values("total", ascending=False, na_position="last", kind="stable")'
        in lines
    )
    assert lines[-1] == "  → ping()"
