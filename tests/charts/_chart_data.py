"""Results a chart is drawn from, and a short way to call the chart tool over them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from loom_nb import RunContext, ToolOutput, ToolResult
from loom_nb.charts import chart_tools

PNG = b"\x89PNG\r\n\x1a\n"
TOOL = chart_tools().tools["chart"]


def weekly() -> pd.DataFrame:
    """What frames_aggregate gives for a weekly bucket: six Mondays (UTC), then the NaT group."""
    weeks = pd.date_range("2024-01-01", periods=6, freq="W-MON", tz="UTC")
    return pd.DataFrame(
        {
            "week_created_at": pd.Series([*weeks, pd.NaT], dtype="datetime64[ns, UTC]"),
            "count": np.array([3, 1, 4, 1, 5, 9, 2], dtype="int64"),
            "sum_total": [310.0, 120.5, 480.0, 101.0, 777.7, 1500.0, 250.0],
        }
    )


def orders() -> pd.DataFrame:
    """Twelve rows as frames_select returns them: text, numbers, timestamps, a category."""
    return pd.DataFrame(
        {
            "id": np.arange(1, 13),
            "status": ["open", "closed", "open", "shipped"] * 3,
            "segment": pd.Categorical(["retail", "wholesale", None] * 4),
            "total": [
                5.0,
                150.0,
                250.0,
                99.0,
                101.0,
                np.nan,
                300.0,
                12.5,
                40.0,
                160.0,
                75.0,
                220.0,
            ],
            "qty": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12],
            "created_at": pd.date_range("2024-01-01", periods=12, freq="3D", tz="UTC"),
        }
    )


def results(*frames: tuple[str, str, Any]) -> list[ToolResult]:
    """``(call id, tool name, data)`` as the thread's tool results."""
    return [ToolResult(call_id, name, "rows", data) for call_id, name, data in frames]


def context(found: Sequence[ToolResult]) -> RunContext:
    return RunContext("analyst", "thread", _results=lambda: list(found))


async def draw(found: Sequence[ToolResult], **arguments: Any) -> ToolOutput:
    """Call the chart tool as the agent loop does (schema, then the run)."""
    return await TOOL.call(arguments, context(found))
