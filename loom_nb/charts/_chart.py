"""The drawing of a saved chart: what ``loom_nb.Chart`` (a value of the core) asks for when it
is shown, through the composition root."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from loom_nb._chart import ChartDrawing
from loom_nb.charts import _draw
from loom_nb.charts._plot import Plot, caption, plan


class Drawing:
    """One chart's plan (``_plot.plan``) and its picture, worked out once."""

    def __init__(self, spec: Mapping[str, Any], data: Any) -> None:
        self._plot: Plot = plan(spec, data)

    @property
    def title(self) -> str:
        return self._plot.title

    @property
    def caption(self) -> str:
        return caption(self._plot)

    def figure(self) -> Any:
        return _draw.figure(self._plot)

    def png(self) -> bytes:
        return self._png

    @functools.cached_property
    def _png(self) -> bytes:
        return _draw.png(self.figure())


def drawing(spec: Mapping[str, Any], data: Any) -> ChartDrawing:
    """The drawing ``loom_nb.Chart`` asks for, typed by the core's contract."""
    return Drawing(spec, data)
