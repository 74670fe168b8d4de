"""The chart an export draws: :func:`draw_chart`, the ``chart`` tool's chart of a frame drawn with
pyplot, the way a notebook shows a figure. An export carries this module as code (see
``loom_nb._embed``): numpy, pandas and matplotlib, with loom_nb's constants as their values.

It follows the tool's plan (``_plot.py``): rows without x or y left out (infinite numbers too),
one series per colour value in the order they first appear ("(missing)" for a missing one),
timestamps on their own wall clock (the time zone named on the axis), categories in their own
order, a time bucket's bar starting at its start, a line left to right, a histogram's bins by
the tool's own ``bin_edges`` (at most ``MAX_BINS``, counted before any is made). Every text is
drawn as written: the model and the data chose it, so no ``$...$`` is read as mathtext and no
``text.usetex`` sends it to TeX. No module of loom_nb imports this one (it imports pyplot): the
export reads its file.
"""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from loom_nb.charts._bins import bin_edges
from loom_nb.charts._draw import DPI, LITERAL, PALETTE, SIZE
from loom_nb.charts._plot import default_title


def draw_chart(
    frame: pd.DataFrame,
    kind: str,
    x: str,
    y: str | None = None,
    color: str | None = None,
    title: str | None = None,
    edges: list[float] | None = None,
) -> Any:
    """The chart tool's chart of ``frame``: a bar, line, area, scatter, histogram or box of ``x``
    (and ``y``), one series per value of ``color``; the figure, shown once as a cell's result.
    A histogram with ``y`` is one of a bins aggregate: ``x`` holds each bin's left edge, ``y``
    its count, ``edges`` the aggregate's bins."""
    data = frame.dropna(subset=[c for c in (x, y) if c is not None])
    for column in (x, y):  # an infinite number has no place on an axis: left out, as the tool does
        if column is not None and pd.api.types.is_float_dtype(data[column].dtype):
            data = data[np.isfinite(data[column].to_numpy(dtype="float64"))]
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
        series = [("", np.ones(len(data), dtype=bool))]
    else:
        codes, uniques = pd.factorize(data[color], use_na_sentinel=False)
        series = [
            ("(missing)" if pd.isna(u) else str(u), codes == i) for i, u in enumerate(uniques)
        ]
    fig, ax = plt.subplots(figsize=SIZE, dpi=DPI, layout="constrained")
    if kind == "box":  # the quartiles of every row, by x (pandas' linear quantile)
        values = data[y].astype("float64")
        keys = pd.Series("all rows", index=data.index) if x == y else data[x]
        grouped = values.groupby(keys, sort=True, observed=True)
        boxes = [
            {
                "whislo": part.min(),
                "q1": part.quantile(0.25),
                "med": part.median(),
                "q3": part.quantile(0.75),
                "whishi": part.max(),
            }
            for _, part in grouped
        ]
        ax.bxp(
            boxes,
            positions=list(range(len(boxes))),
            widths=0.6,
            showfliers=False,
            patch_artist=True,
            boxprops={"facecolor": PALETTE[0], "alpha": 0.6},
            medianprops={"color": "#333333"},
            manage_ticks=False,
        )
        labels = [str(key) for key, _ in grouped]
    elif kind == "histogram" and y is not None:  # counted already: each bin weighs its count
        ys = data[y].to_numpy(dtype="float64", na_value=np.nan)
        bins = np.unique(xs.astype("float64")) if edges is None else np.asarray(edges)
        if edges is None:  # no saved edges: the last bin as wide as the narrowest
            step = np.diff(bins).min() if len(bins) > 1 else 1.0
            bins = np.append(bins, bins[-1] + step)
        ax.hist(
            [xs[rows].astype("float64") for _, rows in series],
            bins=list(bins),
            weights=[ys[rows] for _, rows in series],
            color=list(PALETTE[: len(series)]),
            label=[label for label, _ in series],
        )
    elif kind == "histogram":
        # times as days since 1970, matplotlib's own date numbers, so that the bins of one
        # time (a day wide) are the same in every unit
        if is_time:
            numbers = xs.astype("datetime64[us]").astype("int64") / 86_400_000_000
        else:
            numbers = xs.astype("float64")
        parts = [numbers[rows] for _, rows in series]
        ax.hist(
            parts,
            bins=list(bin_edges(numbers)),
            color=list(PALETTE[: len(parts)]),
            label=[label for label, _ in series],
        )
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
            colour = PALETTE[i % len(PALETTE)]
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
        ax.set_xticks(range(len(labels)), [str(label) for label in labels], **LITERAL)
    ax.set_title(title or default_title(kind, x, y), **LITERAL)
    ax.set_xlabel(f"{x} ({tz})" if tz is not None else x, **LITERAL)
    ax.set_ylabel("rows" if kind == "histogram" and y is None else str(y), **LITERAL)
    ax.grid(axis="y", alpha=0.3)
    if color is not None:
        legend = ax.legend(title=color, fontsize="small", frameon=False)
        for text in (legend.get_title(), *legend.get_texts()):
            text.update(LITERAL)
    plt.close(fig)  # else pyplot shows it a second time when the cell ends
    return fig
