"""Charts in threads: the design example run by an agent, the spec saved and drawn again from
memory and SQLite, and the chart in each thread view."""

from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from loom_nb import (
    Agent,
    Message,
    ReplayModel,
    Reply,
    Store,
    ToolCall,
    ToolResult,
    define_agent,
)
from loom_nb.charts import Chart, chart_tools
from loom_nb.frames import frame_tools
from loom_nb.notebook.history import history_html
from loom_nb.notebook.text import TextView
from loom_nb.sqlite import sqlite_store
from tests.charts._chart_data import PNG

QUESTION = "Which orders above 100 are still open? Plot them by week."
WEEKLY = {
    "table": "orders",
    "group_by": [{"column": "created_at", "bucket": "week"}],
    "filters": [
        {"column": "status", "op": "eq", "value": "open"},
        {"column": "total", "op": "gt", "value": 100},
    ],
}
BAR = {
    "result": "call_weekly",
    "kind": "bar",
    "x": "week_created_at",
    "y": "count",
    "title": "Open orders above 100, by week",
}


def orders() -> pd.DataFrame:
    created = pd.to_datetime(
        [
            "2024-01-01T10:00Z",  # Monday, week 1
            "2024-01-03T10:00Z",
            "2024-01-07T23:59Z",  # Sunday: still week 1
            "2024-01-08T00:00Z",  # Monday: week 2
            "2024-01-20T12:00Z",  # week 3
            None,  # no timestamp: the NaT group
            "2024-01-02T10:00Z",  # closed
            "2024-01-02T10:00Z",  # open but 100 or less
        ],
        utc=True,
    )
    return pd.DataFrame(
        {
            "id": range(1, 9),
            "status": ["open"] * 6 + ["closed", "open"],
            "total": [150.0, 120.0, 101.0, 300.0, 250.0, 180.0, 500.0, 100.0],
            "created_at": created,
        }
    )


def analyst(store: Store | None = None) -> tuple[Agent, ReplayModel]:
    model = ReplayModel(
        [
            Reply("Counting them by week.", [ToolCall("call_weekly", "frames_aggregate", WEEKLY)]),
            Reply("Drawing it.", [ToolCall("call_bar", "chart", BAR)]),
            "Here they are: 3, 1 and 1 open orders above 100 in the three weeks.",
        ]
    )
    agent = define_agent(
        name="analyst",
        model=model,
        store=store,
        connectors=[frame_tools({"orders": orders()}), chart_tools()],
    )
    return agent, model


def test_the_design_example_aggregates_by_week_then_draws_a_bar_chart():
    agent, model = analyst()
    result = agent.run_sync(QUESTION)
    assert result.status == "complete"
    [c] = result.charts
    assert isinstance(c, Chart) and c.kind == "bar" and c.title == BAR["title"]
    assert c.spec["result"] == "call_weekly" and c.spec["left_out"] == {"x": 1, "y": 0}
    weeks = pd.to_datetime(["2024-01-01", "2024-01-08", "2024-01-15"], utc=True)
    expected = pd.DataFrame({"week_created_at": weeks.astype(c.data["week_created_at"].dtype)})
    expected["count"] = [3, 1, 1]
    pd.testing.assert_frame_equal(c.data, expected)
    # what the model was told: the text of what was drawn, never the image
    told = model.requests[2].messages[-1].tool_results[0]
    assert told.name == "chart" and not told.is_error
    assert told.content.startswith(
        'Drew a bar chart of call_weekly (frames_aggregate), titled "Open orders above 100, by '
        'week": x week_created_at (2024-01-01 to 2024-01-15, in UTC), y count; 3 bars, y from '
        "1 to 3.\n1 row without week_created_at not shown."
    )
    assert [ch.spec for ch in result.thread.charts] == [c.spec]
    [bars] = c.figure().axes[0].collections
    assert len(bars.get_paths()) == 3
    assert c.png().startswith(PNG)


def test_a_chart_asked_for_in_the_same_turn_as_its_rows_is_refused_with_a_reason():
    model = ReplayModel(
        [
            Reply(
                "",
                [
                    ToolCall("call_weekly", "frames_aggregate", WEEKLY),
                    ToolCall("call_bar", "chart", BAR),
                ],
            ),
            "I will draw it next turn.",
        ]
    )
    agent = define_agent(
        name="a", model=model, connectors=[frame_tools({"orders": orders()}), chart_tools()]
    )
    result = agent.run_sync(QUESTION)
    refused = result.new_messages[2].tool_results[1]
    assert refused.is_error and result.charts == []
    assert "no earlier result 'call_weekly' in this thread (a call of this same turn" in (
        refused.error or ""
    )


def test_the_spec_round_trips_through_json_and_older_messages_still_load():
    agent, _ = analyst()
    result = agent.run_sync(QUESTION)
    [message] = [m for m in result.thread.messages if any(r.chart for r in m.tool_results)]
    again = Message.from_dict(json.loads(json.dumps(message.to_dict())))
    assert again == message and again.tool_results[0].chart == message.tool_results[0].chart
    assert Chart(again.tool_results[0].chart or {}).png() == result.charts[0].png()
    old = {"kind": "tool_result", "call_id": "c", "name": "t", "content": "x", "is_error": False}
    assert (
        ToolResult("c", "t", "x")
        == Message.from_dict(
            {"role": "tool", "parts": [old], "created_at": "2024-01-01T00:00:00+00:00"}
        ).parts[0]
    )
    assert "chart" not in Message("tool", [ToolResult("c", "t", "x")]).to_dict()["parts"][0]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_reloaded_thread_draws_its_chart_again(kind: str, tmp_path: Path):
    path = tmp_path / "loom.db"
    agent, _ = analyst(sqlite_store(path) if kind == "sqlite" else None)
    result = agent.run_sync(QUESTION)
    # a new agent and store object, as after a kernel restart (memory: the same store)
    reloaded, _ = analyst(sqlite_store(path) if kind == "sqlite" else agent.store)
    thread = reloaded.thread(result.thread_id)
    [c] = thread.charts
    assert c.spec == result.charts[0].spec
    pd.testing.assert_frame_equal(c.data, result.charts[0].data)
    assert c.png().startswith(PNG) and len(c.figure().axes[0].collections[0].get_paths()) == 3


def test_the_saved_thread_html_shows_the_chart_as_a_data_uri_png():
    agent, _ = analyst()
    result = agent.run_sync(QUESTION)
    html = history_html(result.thread.messages, rows=10)
    [encoded] = re.findall(
        r'<img class="loom-chart-image" src="data:image/png;base64,([^"]+)"', html
    )
    assert base64.b64decode(encoded).startswith(PNG)
    assert 'alt="bar chart · Open orders above 100, by week · 3 bars, one week each"' in html
    assert html.count('class="loom-chart"') == 1


def test_the_text_view_names_the_chart():
    agent, _ = analyst()
    result = agent.run_sync(QUESTION)
    out = io.StringIO()
    TextView(out=out).render(result.thread)
    caption = "bar chart · Open orders above 100, by week · 3 bars, one week each"
    assert f"  ← chart: [chart: {caption}]\n" in out.getvalue()


def test_the_widget_view_shows_the_chart_as_an_image():
    from loom_nb.notebook.widgets import ThreadView

    agent, _ = analyst()
    view = ThreadView(agent_name="analyst")
    agent.run_sync(QUESTION, on_event=view.on_event)
    [image] = [w for w in view.body.children if "loom-chart" in w._dom_classes]
    assert image.value.startswith('<img class="loom-chart-image" src="data:image/png;base64,')


def test_every_html_output_of_the_static_copy_is_kept_from_mathjax_the_captions_too():
    """The saved copy of a view is HTML outputs around each chart's PNG; MathJax typesets an
    HTML output's ``$...$`` unless it is marked, and a chart's title is the model's text."""
    from loom_nb.notebook.widgets import ThreadView

    agent, model = analyst()
    titled = {**BAR, "title": "Revenue $\\alpha$ and $x^2$"}
    model.replies[1] = Reply("Drawing it.", [ToolCall("call_bar", "chart", titled)])
    view = ThreadView(agent_name="analyst")
    agent.run_sync(QUESTION, on_event=view.on_event)
    bundles = view.static_bundles()
    assert any("image/png" in b for b in bundles)
    html = [b["text/html"] for b in bundles if "text/html" in b]
    assert any("Revenue $\\alpha$" in h for h in html)
    assert all("mathjax_ignore tex2jax_ignore" in h for h in html)
