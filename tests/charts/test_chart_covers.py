"""Charts draw the data, not a page: the result's every row (up to the chart's own bound, said
when reached), a histogram over every matching row from the backend's bins, time buckets one
bucket wide and labelled with their period, and a caption that says what it covers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from loom_nb import ReplayModel, Reply, define_agent
from loom_nb.charts import Chart, chart_tools
from loom_nb.charts._plot import plan
from loom_nb.frames import frame_tools
from tests.charts._chart_data import context

pytest.importorskip("matplotlib")


def agent_over(frames: dict[str, pd.DataFrame], *calls: Any, **options: Any) -> Any:
    replies: list[Reply | str] = [Reply("", [c]) for c in calls]
    return define_agent(
        name="a",
        model=ReplayModel([*replies, "done"]),
        connectors=[frame_tools(frames, **options), chart_tools()],
    )


def call_id(result: Any, n: int) -> str:
    return [c.id for m in result.thread.messages for c in m.tool_calls][n]


def totals(n: int) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    return pd.DataFrame({"id": np.arange(n), "total": rng.gamma(2.0, 40.0, n)})


def test_a_histogram_of_20000_rows_counts_20000() -> None:
    orders = totals(20_000)
    bins = {"table": "orders", "group_by": [{"column": "total", "bins": 20}]}
    agent = agent_over({"orders": orders}, ("frames_aggregate", bins))
    first = agent.run_sync("bin them")
    histogram = {"result": call_id(first, 0), "kind": "histogram", "x": "bin_total", "y": "count"}
    agent.model = ReplayModel([Reply("", [("chart", histogram)]), "done"])
    result = agent.run_sync("draw", thread_id=first.thread_id)
    [chart] = result.charts
    assert "20,000 rows in 20 bins" in chart.caption
    counts, edges = np.histogram(orders["total"], bins=20)
    drawn = plan(chart.spec, chart.data)
    [series] = drawn.series
    assert series.y.tolist() == counts.tolist()  # every row, in numpy's bins
    assert drawn.bins is not None
    assert drawn.bins.tolist() == pytest.approx(edges.tolist())
    [ax] = chart.figure().axes
    [bars] = ax.collections
    lefts = [float(p.vertices[:, 0].min()) for p in bars.get_paths()]
    assert lefts == pytest.approx(edges[:-1].tolist())  # each bar one bin wide


def test_53_weekly_buckets_draw_53_bars_one_week_wide_labelled_with_their_week() -> None:
    from matplotlib import dates

    days = pd.date_range("2024-01-01", "2024-12-31", freq="D", tz="Europe/Paris")
    orders = pd.DataFrame({"id": np.arange(len(days)), "created_at": days})
    weekly = {"table": "orders", "group_by": [{"column": "created_at", "bucket": "week"}]}
    agent = agent_over({"orders": orders}, ("frames_aggregate", weekly))
    first = agent.run_sync("weekly")
    assert len(first.frames[-1]) == 53  # not cut at max_rows (50)
    bar = {"result": call_id(first, 0), "kind": "bar", "x": "week_created_at", "y": "count"}
    agent.model = ReplayModel([Reply("", [("chart", bar)]), "done"])
    [chart] = agent.run_sync("chart it", thread_id=first.thread_id).charts
    assert chart.caption.endswith("53 bars, one week each")
    [ax] = chart.figure().axes
    [bars] = ax.collections
    paths = bars.get_paths()
    assert len(paths) == 53
    widths = [float(np.ptp(p.vertices[:, 0])) for p in paths]
    assert widths == pytest.approx([7.0] * 53)  # a week wide, summer time or not
    mondays = pd.date_range("2024-01-01", periods=53, freq="W-MON").to_numpy()
    lefts = [float(p.vertices[:, 0].min()) for p in paths]
    assert lefts == pytest.approx(list(dates.date2num(mondays)))
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels[0] == "2024-W01" and "2024-W03" in labels and len(labels) <= 30


def test_a_month_bar_is_as_long_as_its_month() -> None:
    stamps = pd.to_datetime(["2024-01-05", "2024-02-10", "2024-03-01"])
    orders = pd.DataFrame({"id": [1, 2, 3], "created_at": stamps})
    monthly = {"table": "orders", "group_by": [{"column": "created_at", "bucket": "month"}]}
    agent = agent_over({"orders": orders}, ("frames_aggregate", monthly))
    first = agent.run_sync("monthly")
    bar = {"result": call_id(first, 0), "kind": "bar", "x": "month_created_at", "y": "count"}
    agent.model = ReplayModel([Reply("", [("chart", bar)]), "done"])
    [chart] = agent.run_sync("chart", thread_id=first.thread_id).charts
    [ax] = chart.figure().axes
    widths = [float(np.ptp(p.vertices[:, 0])) for p in ax.collections[0].get_paths()]
    assert widths == pytest.approx([31.0, 29.0, 31.0])  # 2024 is a leap year
    assert [t.get_text() for t in ax.get_xticklabels()] == ["2024-01", "2024-02", "2024-03"]


def test_a_chart_of_a_cut_frame_says_what_it_covers() -> None:
    orders = totals(300)
    agent = agent_over(
        {"orders": orders}, ("frames_select", {"table": "orders"}), max_rows=10, frame_rows=100
    )
    first = agent.run_sync("rows")
    histogram = {"result": call_id(first, 0), "kind": "histogram", "x": "total"}
    agent.model = ReplayModel([Reply("", [("chart", histogram)]), "done"])
    result = agent.run_sync("draw", thread_id=first.thread_id)
    [chart] = result.charts
    assert plan(chart.spec, chart.data).rows == 100  # the user's frame, not the model's page of 10
    assert chart.caption.endswith("100 rows in " + chart.caption.split(" rows in ")[1])
    assert "of 100 of 300 rows" in chart.caption
    text = list(result.thread.tool_results())[-1].content
    assert "The result holds 100 of 300 rows." in text


def test_past_its_bound_a_chart_draws_the_first_rows_and_says_so() -> None:
    frame = pd.DataFrame({"n": np.arange(120), "v": np.arange(120) * 2.0})
    from loom_nb import ToolResult

    found = [ToolResult("c1", "mine", "rows", frame)]
    tool = chart_tools(max_points=100).tools["chart"]
    import asyncio

    out = asyncio.run(
        tool.call({"result": "c1", "kind": "scatter", "x": "n", "y": "v"}, context(found))
    )
    assert out.chart is not None
    chart = Chart(out.chart)
    assert len(chart.data) == 100
    assert "The first 100 of 120 rows drawn (a chart holds at most 100" in (out.content or "")


def test_a_box_plot_of_20000_rows_shows_the_quartiles_of_every_row() -> None:
    """The boxes are pandas' quartiles of every matching row (20,000, far past max_rows and
    the chart's max_points), drawn in the picture and in the export; a result that holds
    part of the rows is refused, saying what to do instead."""
    from loom_nb._export import thread_cells

    orders = totals(20_000).assign(status=lambda d: np.where(d["id"] % 3, "paid", "open"))
    agent = agent_over(
        {"orders": orders},
        ("frames_select", {"table": "orders", "columns": ["status", "total"]}),
        ("frames_select", {"table": "orders", "columns": ["status", "total"], "limit": 100}),
        max_rows=5,
        frame_rows=20_000,
    )
    first = agent.run_sync("fetch")
    box = {"kind": "box", "x": "status", "y": "total"}
    charts = [
        ("chart", {"result": call_id(first, 0), **box}),
        ("chart", {"result": call_id(first, 0), "kind": "box", "x": "total", "y": "total"}),
        ("chart", {"result": call_id(first, 1), **box}),
    ]
    agent.model = ReplayModel([*(Reply("", [c]) for c in charts), "done"])
    result = agent.run_sync("draw", thread_id=first.thread_id)
    by_status, whole = result.charts
    assert "20,000 rows in 2 boxes" in by_status.caption
    assert "20,000 rows in 1 box" in whole.caption
    drawn = plan(by_status.spec, by_status.data)
    grouped = orders.groupby("status")["total"]
    expected = [
        (g.min(), g.quantile(0.25), g.median(), g.quantile(0.75), g.max()) for _, g in grouped
    ]
    assert drawn.categories == ("open", "paid")
    assert np.ravel(drawn.boxes).tolist() == pytest.approx(np.ravel(expected).tolist())
    [ax] = by_status.figure().axes
    medians = [line.get_ydata()[0] for line in ax.lines if line.get_color() == "#333333"]
    assert medians == pytest.approx([e[2] for e in expected])
    *_, refused = list(result.thread.tool_results())
    assert refused.is_error and "holds 100 of 20,000 rows" in refused.content
    assert "PostgREST cannot" in refused.content
    # the export draws the same boxes from the frame
    exported = thread_cells(result.thread, agent.tools)
    namespace: dict[str, Any] = {"orders": orders}
    for cell in exported.cells:
        if cell.kind == "code":
            exec(cell.source, namespace)
    [ax] = namespace["result_3"].axes
    got = [line.get_ydata()[0] for line in ax.lines if line.get_color() == "#333333"]
    assert got == pytest.approx([e[2] for e in expected])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["open", "paid"]
