"""The model's page and the user's frame: two bounds, and every view says what came back."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from loom_nb import ReplayModel, Reply, UserError, define_agent
from loom_nb._codec import decode, encode, frame_head
from loom_nb._messages import ToolCall
from loom_nb.frames import frame_tools
from loom_nb.notebook._calls import CallText, summary
from loom_nb.notebook._html import frame_html
from loom_nb.notebook.history import history_html
from loom_nb.notebook.text import format_frame


def weekly_orders() -> pd.DataFrame:
    """A year of orders, a few a day: 53 ISO weeks have rows (2024 starts on a Monday)."""
    days = pd.date_range("2024-01-01", "2024-12-31", freq="D", tz="UTC")
    stamps = np.repeat(days, 3)
    return pd.DataFrame(
        {
            "id": np.arange(len(stamps)),
            "total": np.arange(len(stamps)) % 97 * 1.5,
            "created_at": stamps,
        }
    )


def run(connector: Any, *calls: tuple[str, dict[str, Any]]) -> Any:
    replies: list[Reply | str] = [Reply("", [c]) for c in calls]
    agent = define_agent(name="a", model=ReplayModel([*replies, "done"]), connectors=[connector])
    return agent, agent.run_sync("go")


WEEKS = {"table": "orders", "group_by": [{"column": "created_at", "bucket": "week"}]}


def test_a_53_group_aggregate_gives_the_user_53_rows_and_the_model_50() -> None:
    orders = weekly_orders()
    _, result = run(frame_tools({"orders": orders}), ("frames_aggregate", WEEKS))
    frame = result.frames[-1]
    assert frame.shape == (53, 2)  # not cut at max_rows
    expected = orders.groupby(
        pd.Grouper(key="created_at", freq="W-MON", closed="left", label="left")
    ).size()
    assert frame["count"].tolist() == expected.tolist()
    seen = list(result.thread.tool_results())[-1].content
    assert " rows=50 " in seen and "total_rows=53" in seen  # the model's page
    assert "The user's DataFrame of this call holds 53 groups." in seen


def test_where_frame_rows_cuts_the_frame_every_view_says_so_and_names_the_setting() -> None:
    agent, result = run(
        frame_tools({"orders": weekly_orders()}, max_rows=10, frame_rows=50),
        ("frames_aggregate", WEEKS),
    )
    frame = result.frames[-1]
    assert len(frame) == 50
    said = "50 of 53 groups (frame_rows=50 cut it)"
    r = list(result.thread.tool_results())[-1]
    assert f"holds {said}; the user can raise frame_rows" in r.content
    call = next(c for m in result.thread.messages for c in m.tool_calls)
    calls = CallText(agent.tools)
    assert summary(calls.words(call), r) == (
        f"frames_aggregate · orders · count by week of created_at · {said}"
    )
    assert said in frame_html(frame, 5)  # the live view's caption
    assert said in format_frame(frame, 5)  # the text view
    # The static view of the saved thread reads the counts without decoding the frame.
    saved = agent.store.load(result.thread_id)
    assert said in history_html(saved.messages, rows=5, calls=calls)


def test_a_header_counts_what_came_back_not_the_limit() -> None:
    orders = weekly_orders()
    small = {"table": "orders", "filters": [{"column": "id", "op": "lt", "value": 3}]}
    agent, result = run(
        frame_tools({"orders": orders}),
        ("frames_select", {**small, "limit": 50}),
        ("frames_select", small),
        ("frames_select", {"table": "orders", "limit": 20, "offset": 5}),
    )
    calls = CallText(agent.tools)
    pairs = [
        (c, r)
        for m in result.thread.messages
        for c in m.tool_calls
        for r in list(result.thread.tool_results())
        if r.call_id == c.id
    ]
    headers = [summary(calls.words(c), r) for c, r in pairs]
    assert headers == [
        "frames_select · orders · id < 3 · 3 rows (limit 50)",
        "frames_select · orders · id < 3 · 3 rows",
        f"frames_select · orders · 20 of {len(orders) - 5:,} rows from offset 5 (limit 20)",
    ]
    # Before the result comes, the header says what was asked.
    assert calls.words(pairs[0][0]) == "frames_select · orders · id < 3 · limit 50"


def test_the_user_frame_holds_every_matching_row_up_to_frame_rows() -> None:
    orders = weekly_orders()  # 1,098 rows
    conn = frame_tools({"orders": orders}, max_rows=5, frame_rows=1000)
    _, result = run(conn, ("frames_select", {"table": "orders", "order": [{"column": "id"}]}))
    frame = result.frames[-1]
    pd.testing.assert_frame_equal(frame, orders.head(1000))
    assert frame.attrs["loom"]["matched"] == len(orders)
    seen = list(result.thread.tool_results())[-1].content
    assert " rows=5 " in seen and "next page starts at offset=5" in seen


def test_the_counts_survive_the_store() -> None:
    frame = weekly_orders().head(3)
    frame.attrs["loom"] = {
        "what": "row",
        "rows": 3,
        "matched": 9,
        "offset": 0,
        "limit": None,
        "frame_rows": 3,
    }
    back = decode(encode(frame))
    assert back.attrs["loom"] == frame.attrs["loom"]
    head = frame_head(encode(frame), 1)
    assert head is not None and head.counts == frame.attrs["loom"]


@pytest.mark.parametrize("frame_rows", [10, 0, "many", True])
def test_frame_rows_below_max_rows_or_not_an_int_is_refused_at_definition(frame_rows: Any) -> None:
    with pytest.raises(UserError, match="frame_rows must be an int of at least max_rows"):
        frame_tools({"orders": weekly_orders()}, max_rows=50, frame_rows=frame_rows)


def test_a_call_header_without_counts_is_the_words() -> None:
    call = ToolCall("c1", "frames_select", {"table": "orders"})
    conn = frame_tools({"orders": weekly_orders()})
    assert CallText(conn.tools).words(call) == "frames_select · orders"


def test_a_frame_made_from_a_result_does_not_claim_its_counts() -> None:
    _, result = run(frame_tools({"orders": weekly_orders()}), ("frames_aggregate", WEEKS))
    frame = result.frames[-1]
    assert "53 groups" in frame_html(frame, 5)
    assert "53 groups" not in frame_html(frame.head(5), 5)  # pandas copied attrs to it
