"""The orders frame the frame_tools tests share, and short ways to call the tools."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from loom_nb._code import CodeContext
from loom_nb._context import RunContext
from loom_nb._tools import Connector, ToolInputError, ToolOutput

CTX = RunContext("analyst", "thread")


def orders_frame() -> pd.DataFrame:
    """Eight orders, every dtype a notebook meets, with a missing value in most columns."""
    created = [f"2024-01-0{i}T09:00:00Z" for i in range(1, 9)]
    created[5] = None  # id 6
    return pd.DataFrame(
        {
            "id": np.arange(1, 9, dtype="int64"),
            "total": [10.0, 250.5, np.nan, 99.9, 100.0, 0.0, 1200.0, 55.5],
            "status": ["open", "closed", "open", None, "shipped", "open", "Closed", "op_en"],
            "segment": pd.Categorical(
                ["retail", "wholesale", "retail", None, "retail", "wholesale", "retail", "retail"]
            ),
            "priority": pd.Categorical(
                ["low", "high", "mid", "high", None, "low", "mid", "high"],
                categories=["low", "mid", "high"],
                ordered=True,
            ),
            "paid": [True, False, True, False, True, True, False, True],
            "qty": pd.array([1, None, 3, 4, 5, None, 7, 8], dtype="Int64"),
            "created_at": pd.to_datetime(created, utc=True),
            "shipped_on": pd.to_datetime(
                [
                    "2024-02-01",
                    None,
                    "2024-02-03",
                    "2024-02-04",
                    None,
                    "2024-02-06",
                    "2024-02-07",
                    "2024-02-08",
                ]
            ),
        }
    )


def open_orders_over(total: float, **more: Any) -> dict[str, Any]:
    """``frames_select``'s arguments for the open orders above ``total``, the largest first:
    the call the views, the words and the export are shown with."""
    return {
        "table": "orders",
        "filters": [
            {"column": "status", "op": "eq", "value": "open"},
            {"column": "total", "op": "gt", "value": total},
        ],
        "order": [{"column": "total", "desc": True}],
        **more,
    }


def code_result(conn: Connector, tool: str, args: dict[str, Any], **frames: pd.DataFrame) -> Any:
    """What the export's code of ``tool(args)`` computes (its ``result``), run on copies of
    ``frames``."""
    hook = conn.tools[tool].code
    assert hook is not None
    ctx = CodeContext()
    code = hook(args, ctx) or ""  # first: it adds the imports it needs to ctx.setups
    namespace: dict[str, Any] = {name: frame.copy() for name, frame in frames.items()}
    exec("\n\n".join([*ctx.setups, code]), namespace)
    return namespace["result"]


async def call(conn: Connector, tool: str, args: dict[str, Any]) -> ToolOutput:
    return await conn.tools[tool].call(args, CTX)


async def ids(conn: Connector, args: dict[str, Any], tool: str = "frames_select") -> list[int]:
    out = await call(conn, tool, {"table": "orders", **args})
    return [int(i) for i in out.data["id"]]


async def refused(conn: Connector, tool: str, args: dict[str, Any], match: str) -> str:
    """The message of the ToolInputError the call raises; it must contain `match` (a regex)."""
    with pytest.raises(ToolInputError, match=match) as info:
        await call(conn, tool, args)
    return str(info.value)


def flt(column: str, op: str, value: Any = None, negate: bool = False) -> dict[str, Any]:
    f: dict[str, Any] = {"column": column, "op": op}
    if value is not None:
        f["value"] = value
    if negate:
        f["not"] = True
    return f
