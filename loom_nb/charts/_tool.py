"""The ``chart`` tool: its schema, its description, and its run."""

from __future__ import annotations

import importlib.util
from typing import Any

from loom_nb._context import RunContext
from loom_nb._errors import MissingExtra, UserError
from loom_nb._tools import Connector, ToolOutput, connector, tool
from loom_nb.charts._code import chart_code, chart_words
from loom_nb.charts._plot import KINDS, MAX_SERIES, describe, plan
from loom_nb.charts._spec import chart_spec

_OPTIONAL_TEXT = {"type": ["string", "null"]}

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "result": {
            "type": "string",
            "description": "The id of the earlier tool call whose rows to chart.",
        },
        "kind": {"type": "string", "enum": list(KINDS)},
        "x": {"type": "string", "description": "A column of that result."},
        "y": {
            **_OPTIONAL_TEXT,
            "description": "A numeric column of that result; leave it out for a histogram "
            "of rows (a box plot shows its spread by x).",
        },
        "color": {
            **_OPTIONAL_TEXT,
            "description": f"A column whose values split the rows into series (at most "
            f"{MAX_SERIES}).",
        },
        "title": {**_OPTIONAL_TEXT, "maxLength": 200},
    },
    "required": ["result", "kind", "x"],
    "additionalProperties": False,
}

DESCRIPTION = (
    "Draw a chart of rows you already fetched in this conversation: result is the id of that "
    "tool call (for example the call of an aggregate grouped by week). kind: bar, line, area, "
    "scatter, histogram (bins the values of x and counts rows; no y), or box (the quartiles "
    "of y over every row of the result, one box per value of x; x = y for one box; the result "
    "must hold every matching row). x and y are columns "
    "of that result, y numeric; color splits the rows into series by a column's values; title "
    "is optional. The user sees the chart in the notebook; you get a short description of what "
    "was drawn. Rows without x or y are left out and counted. Aggregate first when the rows "
    "are many or x repeats: each row is one bar or point."
)


def chart_tools(*, max_points: int = 10_000) -> Connector:
    """The ``chart`` tool: the model charts an earlier result of the thread by its call id.

    ``max_points`` bounds the rows one chart holds (they are saved in the thread with it).
    Needs matplotlib: ``pip install 'loom-nb[charts]'``.
    """
    if isinstance(max_points, bool) or not isinstance(max_points, int) or max_points < 1:
        raise UserError(f"max_points must be a positive int, got {max_points!r}")
    if importlib.util.find_spec("matplotlib") is None:  # found now; imported when drawing
        raise MissingExtra("matplotlib", "charts", "chart_tools()")

    def chart(arguments: dict[str, Any], ctx: RunContext) -> ToolOutput:
        spec, rows = chart_spec(arguments, ctx.tool_results(), max_points)
        return ToolOutput(describe(plan(spec, rows), spec), chart=spec)

    drawn = tool(
        description=DESCRIPTION, input=SCHEMA, run=chart, describe=chart_words, code=chart_code
    )
    return connector("charts", {"chart": drawn})
