"""The chart object users get from ``result.charts`` and ``thread.charts``.

A chart is a value of the thread: the spec the ``chart`` tool saved. Drawing it is
``loom_nb.charts``' work (pandas, numpy, matplotlib), reached through the composition root
when a chart is first drawn, so the core names no integration and a thread loaded in a fresh
kernel draws its charts without ``chart_tools()`` being imported.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, Protocol

from loom_nb import _codec, _compose


class ChartDrawing(Protocol):
    """What the core asks of a chart's drawing (``loom_nb.charts._chart.Drawing``)."""

    @property
    def title(self) -> str: ...

    @property
    def caption(self) -> str: ...

    def figure(self) -> Any: ...

    def png(self) -> bytes: ...


class Chart:
    """A chart the agent drew, made from the spec saved in the thread.

    ``figure()`` draws it as a new matplotlib ``Figure``, ``png()`` as image bytes; in a
    notebook, displaying it shows the PNG. ``data`` is the DataFrame it plots.
    """

    def __init__(self, spec: Mapping[str, Any]) -> None:
        #: The saved JSON spec: kind, result (the id of the call whose rows are plotted),
        #: tool, x, y, color, title, left_out (rows without x or y), data.
        self.spec: dict[str, Any] = dict(spec)

    @property
    def kind(self) -> str:
        """bar, line, area, scatter, histogram or box."""
        return str(self.spec["kind"])

    @property
    def title(self) -> str:
        """The title drawn above the chart (the model's, or ``y by x``)."""
        return self._drawing.title

    @property
    def caption(self) -> str:
        """One line: ``bar chart · count by week_created_at · 10 bars``."""
        return self._drawing.caption

    @functools.cached_property
    def data(self) -> Any:
        """The DataFrame it plots: the columns used, without the rows that lack x or y."""
        return _codec.decode(self.spec["data"])

    def figure(self) -> Any:
        """The chart as a new ``matplotlib.figure.Figure`` (Agg canvas; pyplot untouched)."""
        return self._drawing.figure()

    def png(self) -> bytes:
        """The chart as PNG bytes (drawn once per Chart object)."""
        return self._drawing.png()

    def _repr_png_(self) -> bytes:
        return self.png()

    def __repr__(self) -> str:
        return f"<Chart {self.caption}>"

    @functools.cached_property
    def _drawing(self) -> ChartDrawing:
        drawing: ChartDrawing = _compose.chart_drawing(self.spec, self.data)
        return drawing
