"""A ``chart`` call in words and as code: the code draws the same chart with matplotlib from the
variable holding the result it charts (``CodeContext.result_of``), through ``draw_chart``, a
plain-matplotlib function an export defines once in its first cell.

``draw_chart`` follows the tool's own plan (``_plot.py``): rows without x or y left out, one
series per colour value in the order they first appear ("(missing)" for a missing one),
timestamps on their own wall clock (the time zone named on the axis), categories in their
own order, a time bucket's bar starting at its start, a line left to right, a histogram's bins
as numpy's "auto" rule makes them (at most 50). It draws with pyplot, the way a notebook
shows a figure, and closes it, so the cell's result shows it once.
"""

from __future__ import annotations

from typing import Any

from loom_nb._code import CodeContext, py_literal
from loom_nb.charts._bins import MAX_BINS
from loom_nb.charts._draw import DPI, SIZE

DRAW_CHART = (
    '''\
def draw_chart(frame, kind, x, y=None, color=None, title=None):
    """The chart tool's chart of frame: bar, line, area, scatter or histogram of x (and y),
    one series per value of color; the figure, shown once as a cell's result."""
    data = frame.dropna(subset=[c for c in (x, y) if c is not None])
    values = data[x]
    tz = getattr(values.dtype, "tz", None)
    if tz is not None:  # the column's own clock: a weekly bucket starts at its local Monday
        values = values.dt.tz_localize(None)
    is_time = pd.api.types.is_datetime64_any_dtype(values.dtype)
    is_number = pd.api.types.is_numeric_dtype(values.dtype)
    labels = None
    if pd.api.types.is_bool_dtype(values.dtype) or not (is_time or is_number):
        # categories at 0, 1, ...: in their own order, else in the order they first appear
        codes, labels = pd.factorize(values, sort=isinstance(values.dtype, pd.CategoricalDtype))
        values = pd.Series(codes, index=data.index)
    xs = values.to_numpy()
    if color is None:
        series = [(None, np.ones(len(data), dtype=bool))]
    else:
        codes, uniques = pd.factorize(data[color], use_na_sentinel=False)
        series = [
            ("(missing)" if pd.isna(u) else str(u), codes == i) for i, u in enumerate(uniques)
        ]
    palette = plt.colormaps["tab10"].colors  # not the user's colour cycle
    fig, ax = plt.subplots(figsize=SIZE, dpi=DPI, layout="constrained")
    if kind == "histogram":
        # times as days since 1970, matplotlib's own date numbers, so that the bins of one
        # time (a day wide) are the same in every unit
        if is_time:
            numbers = xs.astype("datetime64[us]").astype("int64") / 86_400_000_000
        else:
            numbers = xs.astype("float64")
        edges = np.histogram_bin_edges(numbers, bins="auto")
        if len(edges) - 1 > MAX_BINS:
            edges = np.histogram_bin_edges(numbers, bins=MAX_BINS)
        parts = [numbers[rows] for _, rows in series]
        ax.hist(parts, bins=edges, color=palette[: len(parts)], label=[s for s, _ in series])
        if is_time:
            ax.xaxis_date()
    else:
        distinct = np.unique(xs)
        step = np.diff(distinct).min() if len(distinct) > 1 else np.timedelta64(1, "D")
        step = pd.Timedelta(step) if is_time else (step if len(distinct) > 1 else 1)
        width = 0.8 * step / len(series)
        ys = data[y].to_numpy(dtype="float64", na_value=np.nan)
        for i, (label, rows) in enumerate(series):
            sx, sy = xs[rows], ys[rows]
            if kind in ("line", "area"):  # left to right
                order = np.argsort(sx, kind="stable")
                sx, sy = sx[order], sy[order]
            colour = palette[i % len(palette)]
            if kind == "bar":  # a time bucket's bars start at its start
                left = sx + (i if is_time else i - len(series) / 2) * width
                ax.bar(left, sy, width=width, align="edge", color=colour, label=label)
            elif kind == "line":
                marker = "o" if len(sx) <= 60 else None
                ax.plot(sx, sy, color=colour, marker=marker, markersize=3, label=label)
            elif kind == "area":
                ax.fill_between(sx, sy, color=colour, alpha=0.5 if len(series) == 1 else 0.3)
                ax.plot(sx, sy, color=colour, linewidth=1.2, label=label)
            else:
                ax.scatter(sx, sy, s=14 if len(sx) <= 1000 else 5, color=colour, label=label)
    if labels is not None:
        ax.set_xticks(range(len(labels)), [str(label) for label in labels])
    if kind == "histogram":
        default = f"rows by {x}"
    else:
        default = f"{y} against {x}" if kind == "scatter" else f"{y} by {x}"
    ax.set_title(title or default)
    ax.set_xlabel(f"{x} ({tz})" if tz is not None else x)
    ax.set_ylabel("rows" if kind == "histogram" else y)
    ax.grid(axis="y", alpha=0.3)
    if color is not None:
        ax.legend(title=color, fontsize="small", frameon=False)
    plt.close(fig)  # else pyplot shows it a second time when the cell ends
    return fig'''.replace("SIZE", repr(SIZE), 1)
    .replace("DPI", str(DPI), 1)
    .replace("MAX_BINS", str(MAX_BINS))
)


def chart_words(args: dict[str, Any]) -> str:
    """``bar of call_3 · x week_created_at · y total``."""
    parts = [f"{args['kind']} of {args['result']}", f"x {args['x']}"]
    if args.get("y") is not None:
        parts.append(f"y {args['y']}")
    if args.get("color") is not None:
        parts.append(f"color {args['color']}")
    return " · ".join(parts)


def chart_code(args: dict[str, Any], ctx: CodeContext) -> str | None:
    """``result_4 = draw_chart(result_3, "bar", x=..., y=...)``; None when the result it
    charts has no variable (a view that shows calls one by one)."""
    source = ctx.result_of(str(args.get("result")))
    if source is None:
        return None
    ctx.setup("import numpy as np")
    ctx.setup("import pandas as pd")
    ctx.setup("import matplotlib.pyplot as plt")
    draw = ctx.name("draw_chart")
    ctx.setup(DRAW_CHART.replace("def draw_chart(", f"def {draw}(", 1))
    named = [f"x={py_literal(args['x'])}"]
    named += [
        f"{key}={py_literal(args[key])}"
        for key in ("y", "color", "title")
        if args.get(key) is not None
    ]
    return f"{ctx.result} = {draw}({source}, {py_literal(args['kind'])}, {', '.join(named)})"
