"""The chart object users get from ``result.charts`` and ``thread.charts``."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from loom_nb import _codec
from loom_nb.charts import _draw
from loom_nb.charts._plot import Plot, caption, plan


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
        """bar, line, area, scatter or histogram."""
        return str(self.spec["kind"])

    @property
    def title(self) -> str:
        """The title drawn above the chart (the model's, or ``y by x``)."""
        return self._plot.title

    @property
    def caption(self) -> str:
        """One line: ``bar chart · count by week_created_at · 10 bars``."""
        return caption(self._plot)

    @functools.cached_property
    def data(self) -> Any:
        """The DataFrame it plots: the columns used, without the rows that lack x or y."""
        return _codec.decode(self.spec["data"])

    def figure(self) -> Any:
        """The chart as a new ``matplotlib.figure.Figure`` (Agg canvas; pyplot untouched)."""
        return _draw.figure(self._plot)

    def png(self) -> bytes:
        """The chart as PNG bytes (drawn once per Chart object)."""
        return self._png

    def _repr_png_(self) -> bytes:
        return self.png()

    def __repr__(self) -> str:
        return f"<Chart {self.caption}>"

    @functools.cached_property
    def _plot(self) -> Plot:
        return plan(self.spec, self.data)

    @functools.cached_property
    def _png(self) -> bytes:
        return _draw.png(self.figure())
