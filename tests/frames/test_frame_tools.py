"""frame_tools(): what is checked when the connector is defined."""

from __future__ import annotations

from typing import Any

import pytest

from loom_nb import DuplicateToolError, ReplayModel, UserError, define_agent
from loom_nb.frames import frame_tools


def test_tool_names_follow_the_prefix_and_writes_exist_only_for_writable_frames(orders):
    read_only = frame_tools({"orders": orders})
    assert set(read_only.tools) == {"frames_list_tables", "frames_select", "frames_aggregate"}
    both = frame_tools({"orders": {"frame": orders, "write": True}}, name="local")
    assert set(both.tools) == {
        "local_list_tables",
        "local_select",
        "local_aggregate",
        "local_append",
        "local_update",
    }
    # two connectors live in one agent when their prefixes differ, not otherwise
    define_agent(name="a", model=ReplayModel([]), connectors=[read_only, both])
    with pytest.raises(DuplicateToolError, match="two tools are named 'frames_list_tables'"):
        define_agent(
            name="a", model=ReplayModel([]), connectors=[read_only, frame_tools({"x": orders})]
        )


@pytest.mark.parametrize(
    ("frames", "kwargs", "message"),
    [
        ({"bad name": "ORDERS"}, {}, "not a plain identifier"),
        ({"order": "ORDERS"}, {}, "reserved"),
        (
            {"orders": {"frame": "ORDERS", "colums": ["id"]}},
            {},
            r"^frames\['orders'\] has no option 'colums': did you mean 'columns'\?",
        ),
        (
            {"orders": {"frame": "ORDERS", "writable": True}},
            {},
            r"^frames\['orders'\] has no option 'writable': did you mean 'write'\? the options "
            "are frame, path, connection, description, columns, write$",
        ),
        ({"orders": {"frame": "ORDERS", "columns": ["id", "nope"]}}, {}, "does not have"),
        ({"orders": {"frame": "ORDERS", "columns": ["id", "x-y"]}}, {}, "not a plain identifier"),
        ({"orders": {"frame": "ORDERS", "write": "yes"}}, {}, "True or False"),
        ({"orders": [1, 2, 3]}, {}, "must be a DataFrame"),
        ({"orders": {"description": "no frame"}}, {}, "must be a pandas DataFrame"),
        ({"orders": {"frame": {"id": [1]}}}, {}, "must be a pandas DataFrame"),
        ({}, {}, "non-empty"),
        ({"orders": "ORDERS"}, {"max_rows": 0}, "max_rows"),
        ({"orders": "ORDERS"}, {"name": "my tools"}, "name="),
        ({"orders": "ORDERS"}, {"approve_writes": "no"}, "approve_writes"),
    ],
)
def test_configuration_mistakes_raise_at_once(orders, frames, kwargs, message):
    def resolve(value: Any) -> Any:
        if value == "ORDERS":
            return orders
        if isinstance(value, dict):
            return {k: resolve(v) for k, v in value.items()}
        return value

    with pytest.raises(UserError, match=message):
        frame_tools(resolve(frames), **kwargs)


def test_a_series_is_not_a_frame(orders):
    with pytest.raises(UserError, match="must be a DataFrame"):
        frame_tools({"ids": orders["id"]})


def test_columns_the_agent_could_not_name_need_a_columns_list(orders):
    odd = orders.assign(**{"Order Date": orders["shipped_on"], "limit": 1})
    with pytest.raises(UserError, match=r"could not name: \['Order Date', 'limit'\]"):
        frame_tools({"orders": odd})
    # listing the usable ones works, and the others stay out of every result
    conn = frame_tools({"orders": {"frame": odd, "columns": ["id", "total"]}})
    out = conn.tools["frames_select"].function({"table": "orders"})
    assert list(out.data.columns) == ["id", "total"]


def test_a_writable_frame_needs_an_integer_index(orders):
    with pytest.raises(UserError, match="Index: appended rows would have no index label"):
        frame_tools({"orders": {"frame": orders.set_index("status"), "write": True}})
    with pytest.raises(UserError, match="DatetimeIndex"):
        frame_tools({"orders": {"frame": orders.set_index("created_at"), "write": True}})
    frame_tools({"orders": {"frame": orders.set_index("status")}})  # read-only is fine


def test_a_writable_frame_cannot_hide_a_column_that_must_have_a_value(orders):
    with pytest.raises(UserError, match=r"column 'id' \(int64\) is not in 'columns'"):
        frame_tools({"orders": {"frame": orders, "columns": ["total"], "write": True}})
    frame_tools({"orders": {"frame": orders, "columns": ["id", "paid", "total"], "write": True}})
