"""Each kind of chart as drawn: PNG bytes, and a figure with the artists and points it should
have; time axes on the column's clock; matplotlib's global state left alone."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pandas as pd
import pytest

from loom_nb import MissingExtra
from loom_nb.charts import Chart
from tests.charts._chart_data import PNG, draw, orders, results, weekly

WEEK = results(("call_week", "frames_aggregate", weekly()))
ROWS = results(("call_rows", "frames_select", orders()))


async def chart(found: Any = ROWS, **arguments: Any) -> Chart:
    out = await draw(found, **arguments)
    assert out.chart is not None
    return Chart(out.chart)


def bar_heights(collection: Any) -> list[float]:
    return [float(path.vertices[:, 1].max()) for path in collection.get_paths()]


def bar_lefts(collection: Any) -> list[float]:
    return [float(path.vertices[:, 0].min()) for path in collection.get_paths()]


async def test_bar_chart_of_a_weekly_aggregate_starts_each_bar_at_its_week():
    from matplotlib import dates

    c = await chart(WEEK, result="call_week", kind="bar", x="week_created_at", y="count")
    png = c.png()
    assert png.startswith(PNG) and c._repr_png_() == png
    fig = c.figure()
    [ax] = fig.axes
    [bars] = ax.collections
    assert bar_heights(bars) == [3, 1, 4, 1, 5, 9]  # the NaT group has no place on the axis
    mondays = pd.date_range("2024-01-01", periods=6, freq="W-MON").to_numpy()
    assert bar_lefts(bars) == pytest.approx(list(dates.date2num(mondays)))
    assert ax.get_title() == "count by week_created_at"
    assert ax.get_xlabel() == "week_created_at (UTC)" and ax.get_ylabel() == "count"
    assert isinstance(ax.xaxis.get_major_formatter(), dates.ConciseDateFormatter)
    assert fig.get_supxlabel() == "1 row without week_created_at not shown"
    assert type(fig.canvas).__name__ == "FigureCanvasAgg"


async def test_a_tz_aware_column_is_drawn_on_its_own_wall_clock():
    from matplotlib import dates

    local = weekly().assign(
        week_created_at=pd.date_range("2024-03-18", periods=7, freq="W-MON", tz="Europe/Paris")
    )  # the summer time change (March 31) lies inside
    found = results(("c", "frames_aggregate", local))
    c = await chart(found, result="c", kind="bar", x="week_created_at", y="count")
    [ax] = c.figure().axes
    assert ax.get_xlabel() == "week_created_at (Europe/Paris)"
    wall = pd.date_range("2024-03-18", periods=7, freq="W-MON").to_numpy()  # local midnights
    assert bar_lefts(ax.collections[0]) == pytest.approx(list(dates.date2num(wall)))


async def test_bars_of_categories_side_by_side_per_colour():
    c = await chart(result="call_rows", kind="bar", x="status", y="qty", color="segment")
    [ax] = c.figure().axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["open", "closed", "shipped"]
    assert len(ax.collections) == 3  # one per segment, missing included
    assert sum(len(col.get_paths()) for col in ax.collections) == 12
    legend = ax.get_legend()
    assert legend.get_title().get_text() == "segment"
    assert [t.get_text() for t in legend.get_texts()] == ["retail", "wholesale", "(missing)"]


async def test_line_goes_left_to_right_through_every_point():
    shuffled = orders().sample(frac=1, random_state=3)
    c = await chart(
        results(("c", "frames_select", shuffled)), result="c", kind="line", x="qty", y="total"
    )
    [ax] = c.figure().axes
    [line] = ax.lines
    xy = line.get_xydata()
    assert len(xy) == 11 and list(xy[:, 0]) == sorted(xy[:, 0])
    assert ax.get_legend() is None


async def test_area_fills_under_one_line_per_series():
    c = await chart(result="call_rows", kind="area", x="created_at", y="total", color="status")
    [ax] = c.figure().axes
    assert len(ax.lines) == 3 and len(ax.collections) == 3
    assert sum(len(line.get_xdata()) for line in ax.lines) == 11


async def test_scatter_has_a_point_per_row():
    c = await chart(result="call_rows", kind="scatter", x="qty", y="total", title="Totals")
    [ax] = c.figure().axes
    [points] = ax.collections
    assert len(points.get_offsets()) == 11
    assert ax.get_title() == "Totals" and repr(c) == "<Chart scatter plot · Totals · 11 points>"


async def test_histogram_counts_every_row_in_its_bins():
    c = await chart(result="call_rows", kind="histogram", x="total")
    [ax] = c.figure().axes
    [bins] = ax.collections
    assert sum(bar_heights(bins)) == 11 and ax.get_ylabel() == "rows"
    timed = await chart(result="call_rows", kind="histogram", x="created_at", color="status")
    [ax] = timed.figure().axes
    assert sum(sum(bar_heights(col)) for col in ax.collections) == 12
    assert timed.png().startswith(PNG)


async def test_ten_thousand_points_draw_in_one_artist_per_series():
    n = 10_000
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"i": np.arange(n), "v": rng.normal(size=n)})
    c = await chart(results(("c", "t", frame)), result="c", kind="bar", x="i", y="v")
    [ax] = c.figure().axes
    [bars] = ax.collections
    assert len(bars.get_paths()) == n
    assert c.png().startswith(PNG)


async def test_drawing_leaves_pyplot_and_the_backend_alone():
    import matplotlib

    backend = matplotlib.get_backend()
    c = await chart(WEEK, result="call_week", kind="line", x="week_created_at", y="sum_total")
    c.png()
    assert matplotlib.get_backend() == backend
    pyplot = sys.modules.get("matplotlib.pyplot")
    assert pyplot is None or pyplot.get_fignums() == []


async def test_without_matplotlib_drawing_names_the_extra(monkeypatch):
    from loom_nb.charts import _draw

    c = await chart(WEEK, result="call_week", kind="bar", x="week_created_at", y="count")
    monkeypatch.setattr(_draw, "_MPL", None)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    with pytest.raises(MissingExtra, match=r"Drawing a chart needs the 'matplotlib' package"):
        c.png()
    assert c.caption == "bar chart · count by week_created_at · 6 bars"  # no drawing needed


async def test_controls_in_the_datas_words_are_drawn_as_escapes_without_a_missing_glyph():
    import warnings

    name = "s\x1b[2J\u202e"
    frame = pd.DataFrame(
        {name: ["a\x1b[8m", "b\r", "c"], "n": [1.0, 2.0, 3.0], "k": ["\x07", "y", "y"]}
    )
    found = results(("c", "mine", frame))
    drawing = await chart(found, result="c", kind="bar", x=name, y="n", color="k", title="t\x9b1m")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib warns of each glyph its fonts lack
        fig = drawing.figure()
        assert drawing.png().startswith(PNG)
    [ax] = fig.axes
    assert [t.get_text() for t in ax.get_xticklabels()] == [r"a\x1b[8m", r"b\x0d", "c"]
    assert ax.get_title() == r"t\x9b1m" and ax.get_xlabel() == r"s\x1b[2J\u202e"
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == [r"\x07", "y"]
