"""A frame's errors keep the allowlist: whatever fails (a filter, a sort, an aggregate, a
write that does not fit), the model's error names no value of a column it may not see."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import pytest

from loom_nb import ReplayModel, Reply, define_agent
from loom_nb.frames import frame_tools

SECRET = "sk_FRAME_SECRET"


def accounts() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": [1, 2, 3],
            "note": pd.Series(["a", 7, {"k": "v"}], dtype=object),
            "amount": [10, 20, 30],
            "api_key": [f"{SECRET}-{i}" for i in range(3)],  # hidden
            "pin": pd.array([1111, 2222, 3333], dtype="Int64"),  # hidden
        }
    )


FAILING = [
    ("frames_select", {"filters": [{"column": "note", "op": "gt", "value": 5}]}),
    ("frames_select", {"order": [{"column": "note"}]}),
    ("frames_select", {"filters": [{"column": "api_key", "op": "eq", "value": "x"}]}),
    ("frames_select", {"filters": [{"column": "amount", "op": "like", "value": "1%"}]}),
    ("frames_aggregate", {"aggregates": [{"fn": "mean", "column": "note"}]}),
    ("frames_aggregate", {"group_by": ["note"], "aggregates": [{"fn": "count"}]}),
    ("frames_append", {"rows": [{"amount": "many"}]}),
    ("frames_append", {"rows": [{"amount": 5, "pin": 1}]}),
    (
        "frames_update",
        {"values": {"amount": "x"}, "filters": [{"column": "id", "op": "eq", "value": 1}]},
    ),
    (
        "frames_update",
        {"values": {"api_key": "x"}, "filters": [{"column": "id", "op": "eq", "value": 1}]},
    ),
    (
        "frames_update",
        {"values": {"amount": 1}, "filters": [{"column": "note", "op": "lt", "value": 1}]},
    ),
]


@pytest.mark.parametrize("approve_writes", [True, False])
def test_no_frame_error_shows_a_hidden_columns_value(approve_writes: bool):
    frame = accounts()
    tools = frame_tools(
        {"accounts": {"frame": frame, "columns": ["id", "note", "amount"], "write": True}},
        approve_writes=approve_writes,
    )
    calls = [(name, {"table": "accounts", **args}) for name, args in FAILING]
    model = ReplayModel([Reply("", calls), "done"])
    result = define_agent(name="a", model=model, connectors=[tools]).run_sync("try")
    assert result.status == "complete" and result.error is None
    outcomes = list(result.thread.tool_results())
    failed = [r for r in outcomes if r.is_error]
    assert len(failed) >= len(FAILING) - 2, [r.content for r in outcomes]
    sent: list[Any] = [m.to_dict() for req in model.requests for m in req.messages]
    assert SECRET not in json.dumps(sent, default=str), [r.content for r in failed]
    pd.testing.assert_frame_equal(frame, accounts())  # nothing was written
