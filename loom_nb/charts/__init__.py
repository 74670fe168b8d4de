"""Charts of what the agent fetched, drawn from a spec saved in the thread.

::

    from loom_nb.charts import chart_tools

    analyst = define_agent(
        name="analyst", model=..., store=sqlite_store(),
        connectors=[frame_tools({"orders": orders}), chart_tools()],
    )

The tool ``chart(result, kind, x, y?, color?, title?)``:

- ``result`` names an earlier result of this thread by the id of the call that fetched it
  (a DataFrame: ``frames_select``, ``frames_aggregate``, ``supabase_select``, a tool of
  yours). ``kind`` is bar, line, area, scatter, histogram or box; ``x`` and ``y`` are columns of
  that result (``y`` numeric; a histogram bins ``x`` and has no ``y``); ``color`` splits the
  rows into at most 10 series. Every name is checked against that result's columns; a
  mistake goes back to the model as an error listing the results and columns it may use.
- A box plot (``kind="box"``) shows the quartiles of ``y`` (pandas' linear ``quantile``)
  over every row of the result, one box per value of ``x`` (``x`` = ``y`` for one box),
  whiskers at the smallest and largest value; the chart saves the boxes, not the rows, and
  its caption says how many rows they hold. A result that holds only part of the matching
  rows (a limit, ``frame_rows``) is refused, with what to do instead.
- Rows without an x value (NaT, NaN) have no place on the axis and rows without a y value
  nothing to draw: both are left out, counted, and said under the chart and to the model.
  A missing colour value is a series of its own. Timestamps are drawn on their own wall clock
  (a tz-aware column's time zone, named on the axis), so a weekly bucket's bar starts at its
  local Monday. A line or area is drawn left to right; when x repeats within a series (bars
  that overlap), the note says so.
- The chart is saved in the tool result (``ToolResult.chart``): the spec and the rows it
  plots, only the columns used, at most ``max_points`` rows. After a kernel restart,
  ``%loom resume`` draws it again from the thread; nothing is fetched again.
- The model gets a short text of what was drawn (kind, axes and their range, number of bars
  or points, the y range), never the image. Category and colour series names are values of
  the result: they follow in a data block no value can close, as a select's rows do.

``result.charts`` and ``thread.charts`` give :class:`Chart` objects (``loom_nb.Chart``, also
importable from here): ``.figure()`` (a new matplotlib ``Figure``), ``.png()`` (bytes),
``.data`` (the rows plotted); displaying one in a notebook makes an ``image/png`` output,
which every frontend, GitHub, nbviewer and an untrusted notebook show without JavaScript or
network. The thread view shows each chart as a
PNG embedded in its HTML (a data URI), the text view as ``[chart: ...]``.

Drawing uses matplotlib (``pip install 'loom-nb[charts]'``) with a ``Figure`` of its own and
the Agg canvas: pyplot is never used and your backend is left as it is. matplotlib is imported
when a chart is first drawn, not by ``import loom_nb.charts``.

A chart call reads as ``chart · bar of call_3 · x week_created_at · y total``; ``%loom export``
writes it as ``result_4 = draw_chart(result_3, "bar", x=..., y=...)``, a plain-matplotlib
function the export defines in its first cell (with pyplot there: it is the user's notebook).
"""

from loom_nb import _public
from loom_nb._chart import Chart
from loom_nb.charts._plot import KINDS
from loom_nb.charts._tool import chart_tools

__all__ = ["KINDS", "Chart", "chart_tools"]

_public.publish(__name__, [chart_tools])  # Chart is loom_nb.Chart, a value of the core
