"""A chart call in words and as code: the export draws each chart with matplotlib from the
variable of the result it charts, and the figure holds what the tool's chart shows (the same
bars, points and bins, the same y values, titles and axis labels)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from loom_nb import ReplayModel, Reply, ToolCall, define_agent
from loom_nb._code import CodeContext, call_code, call_words
from loom_nb._export import thread_cells
from loom_nb.charts import Chart, chart_tools
from loom_nb.charts._plot import plan
from loom_nb.frames import frame_tools


def events() -> pd.DataFrame:
    """Rows of every axis kind, with missing values, and a colour with a missing value."""
    created = pd.to_datetime(
        [
            "2024-03-25T10:00Z",
            "2024-03-31T22:30Z",  # Monday 00:30 in Berlin, summer time: a new local week
            "2024-04-02T08:00Z",
            None,
            "2024-04-09T08:00Z",
            "2024-04-16T08:00Z",
        ],
        utc=True,
    ).tz_convert("Europe/Berlin")
    return pd.DataFrame(
        {
            "created_at": created,
            "day": pd.to_datetime(
                ["2024-01-01", "2024-01-02", "2024-01-02", "2024-01-05", None, "2024-01-09"]
            ),
            "total": [150.0, 120.0, np.nan, 300.0, 250.0, 180.0],
            "qty": pd.array([1, 2, 2, None, 5, 9], dtype="Int64"),
            "status": ["open", "paid", None, "open", "paid", "late"],
            "tier": pd.Categorical(
                ["low", "high", "mid", "low", None, "high"],
                categories=["low", "mid", "high"],
                ordered=True,
            ),
        }
    )


WEEKLY = {
    "table": "events",
    "group_by": [{"column": "created_at", "bucket": "week"}],
    "aggregates": [{"fn": "count"}, {"fn": "sum", "column": "total"}],
}
ROWS = {"table": "events", "limit": 50}
#: Bins of uneven width, one of them empty (an aggregate returns only the bins holding rows).
BINS = {"table": "events", "group_by": [{"column": "total", "bins": [100, 130, 200, 220, 400]}]}
CHARTS = [
    ("call_weekly", {"kind": "bar", "x": "week_created_at", "y": "sum_total"}),
    ("call_weekly", {"kind": "line", "x": "week_created_at", "y": "count", "title": "Weekly"}),
    ("call_rows", {"kind": "bar", "x": "status", "y": "total", "color": "tier"}),
    ("call_rows", {"kind": "bar", "x": "tier", "y": "qty"}),
    ("call_rows", {"kind": "bar", "x": "qty", "y": "total", "color": "status"}),
    ("call_rows", {"kind": "area", "x": "day", "y": "total"}),
    ("call_rows", {"kind": "scatter", "x": "total", "y": "qty", "color": "status"}),
    ("call_rows", {"kind": "histogram", "x": "total"}),
    ("call_rows", {"kind": "histogram", "x": "created_at", "color": "status"}),
    ("call_bins", {"kind": "histogram", "x": "bin_total", "y": "count"}),
]


def chart_thread() -> tuple[Any, Any]:
    calls = [
        ToolCall(f"call_chart_{i}", "chart", {"result": r, **a}) for i, (r, a) in enumerate(CHARTS)
    ]
    model = ReplayModel(
        [
            Reply(
                "Fetching.",
                [
                    ToolCall("call_weekly", "frames_aggregate", WEEKLY),
                    ToolCall("call_rows", "frames_select", ROWS),
                    ToolCall("call_bins", "frames_aggregate", BINS),
                ],
            ),
            Reply("Drawing.", calls),
            "Done.",
        ]
    )
    agent = define_agent(
        name="analyst",
        model=model,
        connectors=[frame_tools({"events": events()}), chart_tools()],
    )
    result = agent.run_sync("Chart the events.")
    assert result.status == "complete"
    assert not any(r.is_error for r in result.thread.tool_results())
    return agent, result.thread


def drawn(figure: Any, kind: str) -> dict[str, Any]:
    """What a figure shows: its bars' heights (left to right per series), its lines' and
    scatters' y values, its title and axis labels."""
    ax = figure.axes[0]
    bars = [p for p in ax.patches if p.get_height() or p.get_width()]
    return {
        "bars": sorted(float(p.get_height()) for p in bars),
        "lefts": sorted(round(float(p.get_x()), 9) for p in bars) if kind == "bar" else [],
        "lines": [list(line.get_ydata()) for line in ax.lines],
        "points": sorted(float(v) for c in ax.collections for v in c.get_offsets()[:, 1])
        if any(hasattr(c, "get_offsets") and c.get_offsets().size for c in ax.collections)
        else [],
        "title": ax.get_title(),
        "x": ax.get_xlabel(),
        "y": ax.get_ylabel(),
    }


def expected(chart: Chart) -> dict[str, Any]:
    """The same, from the tool's plan of the chart."""
    p = plan(chart.spec, chart.data)
    ys = [float(v) for s in p.series for v in s.y]
    # bars where the tool draws them (_draw.py): a time bucket's from its start, others
    # centred on x; matplotlib counts days from its own epoch
    from matplotlib.dates import date2num  # matplotlib is there: see conftest.py

    shift = float(date2num(np.datetime64("1970-01-01"))) if p.x_kind == "time" else 0.0
    n, width = len(p.series), p.width / len(p.series)
    lefts = [
        round(float(x + shift + (i if p.x_kind == "time" else i - n / 2) * width), 9)
        for i, s in enumerate(p.series)
        for x in s.x
    ]
    return {
        "bars": sorted(ys) if p.kind in ("bar", "histogram") else [],
        "lefts": sorted(lefts) if p.kind == "bar" else [],
        "lines": [list(s.y) for s in p.series] if p.kind in ("line", "area") else [],
        "points": sorted(ys) if p.kind == "scatter" else [],
        "title": p.title,
        "x": p.x_label,
        "y": p.y_label,
    }


def test_each_exported_chart_draws_what_the_tools_chart_shows() -> None:
    agent, thread = chart_thread()
    exported = thread_cells(thread, agent.tools)
    namespace: dict[str, Any] = {"events": events()}
    for cell in exported.cells:
        if cell.kind == "code":
            exec(cell.source, namespace)
    charts = {r.call_id: Chart(r.chart) for r in thread.tool_results() if r.chart is not None}
    assert len(charts) == len(CHARTS)
    for call_id, chart in charts.items():
        variable = exported.results[call_id]
        got = drawn(namespace[variable], chart.kind)
        want = expected(chart)
        if chart.kind == "area":  # fill_between is a collection without offsets
            got["points"] = []
        assert got == want, (call_id, chart.spec["kind"], chart.spec["x"])


def test_an_exported_chart_of_a_bins_aggregate_draws_its_counts_in_its_bins() -> None:
    """Each bin one bar from its left edge to its right one (uneven widths, the empty bin
    drawn empty), as tall as the aggregate's count: not one bar per row of the aggregate."""
    agent, thread = chart_thread()
    exported = thread_cells(thread, agent.tools)
    namespace: dict[str, Any] = {"events": events()}
    for cell in exported.cells:
        if cell.kind == "code":
            exec(cell.source, namespace)
    [r] = [r for r in thread.tool_results() if r.chart is not None and r.chart.get("edges")]
    bars = namespace[exported.results[r.call_id]].axes[0].patches
    assert [(p.get_x(), p.get_x() + p.get_width()) for p in bars] == [
        (100, 130),
        (130, 200),
        (200, 220),
        (220, 400),
    ]
    totals = events()["total"]
    counts = np.histogram(totals.dropna(), [100, 130, 200, 220, 400])[0]
    assert [p.get_height() for p in bars] == list(counts) and 0 in counts
    assert namespace[exported.results[r.call_id]].axes[0].get_ylabel() == "count"


def test_a_chart_call_reads_as_its_chart_and_its_code_names_the_result_it_draws() -> None:
    agent, thread = chart_thread()
    tool = agent.tools["chart"]
    call = ToolCall("c9", "chart", {"result": "call_weekly", **CHARTS[1][1]})
    assert call_words(call, tool) == "chart · line of call_weekly · x week_created_at · y count"
    colour = ToolCall("c10", "chart", {"result": "call_rows", **CHARTS[2][1]})
    assert call_words(colour, tool) == "chart · bar of call_rows · x status · y total · color tier"
    ctx = CodeContext("result_4", results={"call_weekly": "result_1"})
    assert call_code(call, tool, ctx) == (
        'result_4 = draw_chart(result_1, "line", x="week_created_at", y="count", title="Weekly")'
    )
    assert "import matplotlib.pyplot as plt" in ctx.setups
    # the module's source (_pyplot.py), the constants it takes from loom_nb as their values
    [helper] = [s for s in ctx.setups if "\ndef draw_chart(\n" in s]
    assert helper.startswith("MAX_BINS = 50\n") and "\nDPI = 100\n" in helper
    assert "\ndef bin_edges(values: np.ndarray, max_bins: int = MAX_BINS)" in helper
    assert "loom_nb" not in "\n".join(ctx.setups).replace("loom_nb's", "")
    # a view that shows calls one by one has no variable for the result: no code, the
    # arguments instead
    assert call_code(call, tool, CodeContext()) is None
    exported = thread_cells(thread, agent.tools)
    sources = [c.source for c in exported.cells if c.kind == "code"]
    assert any(
        s.startswith("# Call 4 · chart · bar of result_1 · x week_created_at · y sum_total\n")
        and 'result_4 = draw_chart(result_1, "bar", x="week_created_at", y="sum_total")' in s
        for s in sources
    )


@pytest.mark.parametrize("kind", ["bar", "line"])
def test_a_chart_of_a_failed_read_exports_as_a_comment(kind: str) -> None:
    model = ReplayModel(
        [
            Reply("", [ToolCall("r", "frames_select", {"table": "nope"})]),
            Reply("", [ToolCall("c", "chart", {"result": "r", "kind": kind, "x": "a", "y": "b"})]),
            "Sorry.",
        ]
    )
    agent = define_agent(
        name="a", model=model, connectors=[frame_tools({"events": events()}), chart_tools()]
    )
    thread = agent.run_sync("Chart it.").thread
    cells = thread_cells(thread, agent.tools).cells
    assert cells[-2].kind == "markdown"
    assert cells[-2].source == (
        f"*Call 2* · `chart · {kind} of r · x a · y b` (no code reproduces this call)"
    )
    assert not any("draw_chart" in c.source for c in cells)


TIMES = [["2024-01-25"], ["2024-01-25 06:00", "2024-01-25 06:00"], ["2024-01-01", "2024-03-01"]]
#: Values numpy's "auto" rule would put into thousands of bins: the tool draws at most 50.
SPIKE = [1000.0, *np.random.default_rng(1).normal(0, 1, 1999)]
HISTOGRAMS = [
    *(pd.Series(pd.to_datetime(t)).astype(f"datetime64[{u}]") for t in TIMES for u in ("s", "ns")),
    pd.Series(pd.to_datetime(SPIKE, unit="D")),
    pd.Series(SPIKE),
]


@pytest.mark.parametrize("values", HISTOGRAMS)
def test_an_exported_histogram_has_the_tools_bins(values: pd.Series) -> None:
    """One timestamp (a one-row aggregate's min), repeated ones, a spread, in each unit, and
    values that need the cap on bins: the exported histogram's bins are the tool's."""
    frame = pd.DataFrame({"t": values})
    histogram = {"result": "r", "kind": "histogram", "x": "t"}
    model = ReplayModel(
        [
            Reply("", [ToolCall("r", "frames_select", {"table": "events"})]),
            Reply("", [ToolCall("c", "chart", histogram)]),
            "Drawn.",
        ]
    )
    agent = define_agent(
        name="a",
        model=model,
        connectors=[frame_tools({"events": frame}, max_rows=2000), chart_tools()],
    )
    thread = agent.run_sync("When?").thread
    exported = thread_cells(thread, agent.tools)
    namespace: dict[str, Any] = {"events": frame}
    for cell in exported.cells:
        if cell.kind == "code":
            exec(cell.source, namespace)
    [chart] = [Chart(r.chart) for r in thread.tool_results() if r.chart is not None]
    bins = plan(chart.spec, chart.data).bins
    assert bins is not None
    bars = [p for p in namespace["result_2"].axes[0].patches if p.get_width()]
    assert [round(p.get_x(), 6) for p in bars] == [round(float(b), 6) for b in bins[:-1]]
    assert sum(p.get_height() for p in bars) == len(values)


def test_histogram_bins_are_counted_before_any_is_made() -> None:
    """10,000 close values and one far outlier: numpy before 2.3 would size "auto" bins for
    billions of them; the export's bins (the tool's ``bin_edges``) are at most 50, and finding them
    allocates about what the values take."""
    import tracemalloc

    from loom_nb.charts._bins import bin_edges

    values = np.append(np.random.default_rng(2).normal(0, 1, 9_999), 1e12)
    tracemalloc.start()
    try:
        edges = bin_edges(values)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(edges) == 51
    assert peak < 1_000_000  # the values are 80 kB


def test_the_exports_helpers_keep_clear_of_the_notebooks_variables() -> None:
    """Variables the notebook expects named like the helper's own names (``SIZE``, ``draw_chart``,
    ``bin_edges``): the helper's are renamed, uses inside it too, and it still draws."""
    from loom_nb._embed import embed

    taken = frozenset({"SIZE", "draw_chart", "bin_edges", "LITERAL"})
    ctx = CodeContext(taken=taken)
    names = embed("loom_nb.charts._pyplot", ctx)
    assert {names[n] for n in taken} == {f"{n}_" for n in taken}
    namespace: dict[str, Any] = {n: "the user's" for n in taken}
    exec("\n\n".join(ctx.setups), namespace)
    frame = pd.DataFrame({"v": [1.0, 2.0, 2.5, 9.0]})
    figure = namespace["draw_chart_"](frame, "histogram", x="v", title="$\\foo$ {")
    assert figure.axes[0].get_title() == "$\\foo$ {"
    figure.canvas.draw()  # literal text: no mathtext to fail
    assert all(namespace[n] == "the user's" for n in taken)
