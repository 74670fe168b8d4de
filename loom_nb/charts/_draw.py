"""A chart's plan drawn with matplotlib, on a ``Figure`` of its own with an Agg canvas.

pyplot is never used: no global figure list, and the user's backend (``%matplotlib widget``,
inline, anything) is neither read nor changed. matplotlib is imported here, when a chart is
first drawn; ``import loom_nb.charts`` does not import it. matplotlib is not thread-safe (fonts
and caches are shared), and charts are drawn on the agent's worker threads and the kernel's,
so one lock serializes drawing.

Every text on a chart (the title, the axes' names, category and series names, notes) is drawn
literally: the model and the data wrote it, so no ``$...$`` in it is read as mathtext and no
``text.usetex`` setting sends it to TeX, and no text can fail a drawing.
"""

from __future__ import annotations

import io
import threading
from typing import Any

import numpy as np

from loom_nb._errors import MissingExtra
from loom_nb._inert import inert
from loom_nb.charts._plot import Plot, bucket_days

#: matplotlib's tab10, written out so that the user's colour cycle does not decide.
PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
#: Inches at 100 dpi: 700 × 380 pixels.
SIZE = (7.0, 3.8)
DPI = 100
_MAX_TICKS = 30
_MAX_LABEL = 40
_LOCK = threading.RLock()
#: The properties of a ``Text`` drawn as written: no mathtext, no TeX.
LITERAL: dict[str, Any] = {"parse_math": False, "usetex": False}


def figure(plot: Plot) -> Any:
    """A new ``matplotlib.figure.Figure`` of ``plot``."""
    mpl = _matplotlib()
    with _LOCK:
        fig = mpl.Figure(figsize=SIZE, dpi=DPI, layout="constrained")
        mpl.FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        # Time positions are days since 1970; matplotlib counts days from its epoch (a setting).
        shift = 0.0
        if plot.x_kind == "time":
            shift = float(mpl.dates.date2num(np.datetime64("1970-01-01T00:00:00")))
        _draw_series(mpl, ax, plot, shift)
        ax.autoscale_view()
        _axes(ax, plot, mpl.dates, mpl.ticker)
        if plot.notes:
            fig.supxlabel(
                inert("; ".join(plot.notes)),
                fontsize=8,
                color="#666666",
                x=0.01,
                ha="left",
                **LITERAL,
            )
        _literal_ticks(ax)
        return fig


def png(fig: Any) -> bytes:
    """``fig`` as PNG bytes."""
    buffer = io.BytesIO()
    with _LOCK:
        fig.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def _draw_series(mpl: _Matplotlib, ax: Any, plot: Plot, shift: float) -> None:
    n = len(plot.series)
    labelled = plot.color is not None
    for i, series in enumerate(plot.series):
        colour = PALETTE[i % len(PALETTE)]
        label = _short(series.label) if labelled and series.label is not None else None
        x, y = series.x + shift, series.y
        if plot.kind == "box":
            ax.bxp(
                [
                    {"whislo": lo, "q1": q1, "med": med, "q3": q3, "whishi": hi}
                    for lo, q1, med, q3, hi in plot.boxes
                ],
                positions=list(x),
                widths=plot.width,
                showfliers=False,
                patch_artist=True,
                boxprops={"facecolor": colour, "alpha": 0.6},
                medianprops={"color": "#333333"},
                manage_ticks=False,
            )
        elif plot.kind in ("bar", "histogram"):
            width: Any = plot.width / n  # the series' bars side by side in each x's slot
            if plot.bucket is not None:  # one bucket wide: a month is as long as it is
                width = bucket_days(series.x, plot.bucket) / n
            if plot.x_kind == "time" and plot.kind == "bar":
                left = x + i * width  # a time bucket is labelled by its start: bars begin there
            else:
                left = x + (i - n / 2) * width
            edge = "white" if plot.kind == "histogram" else "none"
            ax.add_collection(_bars(mpl, left, width, y, colour, edge, label))
        elif plot.kind == "line":
            marker = "o" if len(x) <= 60 else None
            ax.plot(x, y, color=colour, marker=marker, markersize=3, label=label)
        elif plot.kind == "area":
            ax.fill_between(x, y, color=colour, alpha=0.5 if n == 1 else 0.3, linewidth=0)
            ax.plot(x, y, color=colour, linewidth=1.2, label=label)
        else:  # scatter
            small = len(x) <= 1000
            size, alpha = (14, 0.85) if small else (5, 0.5)
            ax.scatter(x, y, s=size, color=colour, alpha=alpha, linewidths=0, label=label)


def _bars(
    mpl: _Matplotlib,
    left: np.ndarray,
    width: float | np.ndarray,
    y: np.ndarray,
    colour: str,
    edge: str,
    label: str | None,
) -> Any:
    """Bars as one collection of rectangles from 0 to each ``y`` (``ax.bar`` makes an artist
    per bar: seconds for ten thousand); missing values draw nothing."""
    y = np.nan_to_num(y)
    right = left + width
    zeros = np.zeros_like(y)
    corners = np.stack([left, zeros, left, y, right, y, right, zeros], axis=1)
    polygons: Any = corners.reshape(-1, 4, 2)  # one (4, 2) array of corners per bar
    bars = mpl.PolyCollection(
        polygons,
        facecolors=colour,
        edgecolors=edge,
        linewidths=0.5,
        label=label,
    )
    bars.sticky_edges.y.append(0)  # as ax.bar: no margin under the bars' base
    return bars


def _axes(ax: Any, plot: Plot, dates: Any, ticker: Any) -> None:
    ax.set_title(inert(plot.title), **LITERAL)
    ax.set_xlabel(inert(plot.x_label), **LITERAL)
    ax.set_ylabel(inert(plot.y_label), **LITERAL)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    if all(np.all(np.mod(s.y[~np.isnan(s.y)], 1) == 0) for s in plot.series):
        ax.yaxis.set_major_locator(ticker.MaxNLocator(integer=True))  # counts: no 2.5 ticks
    if plot.ticks is not None:  # each bucket labelled with its period
        middles, periods = plot.ticks
        every = -(-len(middles) // _MAX_TICKS)
        epoch = float(dates.date2num(np.datetime64("1970-01-01T00:00:00")))
        many = len(middles) > 8
        ax.set_xticks(
            [m + epoch for m in middles[::every]],
            list(periods[::every]),
            rotation=60 if many else 0,
            ha="right" if many else "center",
            fontsize="small",
        )
    elif plot.x_kind == "time":
        locator = dates.AutoDateLocator()
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(dates.ConciseDateFormatter(locator))
    elif plot.x_kind == "category":
        positions = np.arange(len(plot.categories))
        step = -(-len(positions) // _MAX_TICKS)  # at most _MAX_TICKS labels
        labels = [_short(c) for c in plot.categories[::step]]
        long = sum(len(label) for label in labels) > 60
        ax.set_xticks(
            positions[::step],
            labels,
            rotation=30 if long else 0,
            ha="right" if long else "center",
            **LITERAL,
        )
    if plot.color is not None:
        legend = ax.legend(
            title=inert(plot.color), fontsize="small", title_fontsize="small", frameon=False
        )
        for text in (legend.get_title(), *legend.get_texts()):
            text.update(LITERAL)


def _short(label: str) -> str:
    """A category or series name cut to fit beside the others (a long value would squeeze the
    axes to nothing), its controls written out (no font draws them)."""
    label = inert(label)
    return label if len(label) <= _MAX_LABEL else label[: _MAX_LABEL - 1] + "…"


def _literal_ticks(ax: Any) -> None:
    """Numbers and dates on the axes come from matplotlib's formatters, not from the data, but
    a ``text.usetex`` setting would still send them to TeX (which may be missing). Ticks made
    while drawing copy the first tick's ``usetex``."""
    for axis in (ax.xaxis, ax.yaxis):
        axis.get_offset_text().set_usetex(False)
        for tick in (*axis.get_major_ticks(), *axis.get_minor_ticks()):
            tick.label1.set_usetex(False)
            tick.label2.set_usetex(False)


class _Matplotlib:
    """The few matplotlib names drawing needs, imported once."""

    def __init__(self) -> None:
        from matplotlib import dates, ticker
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.collections import PolyCollection
        from matplotlib.figure import Figure

        self.Figure = Figure
        self.FigureCanvasAgg = FigureCanvasAgg
        self.dates = dates
        self.ticker = ticker
        self.PolyCollection = PolyCollection


_MPL: _Matplotlib | None = None


def _matplotlib() -> _Matplotlib:
    global _MPL
    if _MPL is None:
        try:
            _MPL = _Matplotlib()
        except ImportError:
            raise MissingExtra("matplotlib", "charts", "Drawing a chart") from None
    return _MPL
