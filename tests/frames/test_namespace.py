"""frame_tools(namespace=...): the agent reads the DataFrames of the user's variables by name,
read-only, listed afresh at each run, ``_`` names left out, at most NAMESPACE_FRAMES."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
from IPython.core.interactiveshell import InteractiveShell
from pandas.testing import assert_frame_equal

from loom_nb import FunctionModel, ModelRequest, ReplayModel, Reply, UserError, define_agent
from loom_nb.frames import NAMESPACE_FRAMES, frame_tools


def namespace() -> dict[str, Any]:
    return {
        "orders": pd.DataFrame({"id": [1, 2, 3], "total": [5.0, 50.0, 500.0]}),
        "customers": pd.DataFrame({"id": [1, 2], "name": ["Ada", "Bob"]}),
        "_hidden": pd.DataFrame({"secret": [1]}),
        "_1": pd.DataFrame({"out": [1]}),  # IPython's output history
        "threshold": 100,
        "rows": [1, 2],
    }


def listed(result: Any) -> list[str]:
    listing = next(r for r in result.thread.tool_results() if r.name == "frames_list_tables")
    return [t["table"] for t in listing.data]


def test_the_agent_lists_and_reads_the_namespaces_frames_by_name() -> None:
    ns = namespace()
    select = {"table": "orders", "filters": [{"column": "total", "op": "gt", "value": 10}]}
    model = ReplayModel([Reply("", [("frames_list_tables", {}), ("frames_select", select)]), "2"])
    tools = frame_tools(namespace=ns)
    assert set(tools.tools) == {"frames_list_tables", "frames_select", "frames_aggregate"}
    result = define_agent(name="a", model=model, connectors=[tools]).run_sync("big orders?")
    assert listed(result) == ["customers", "orders"]  # no _names, no other values
    assert_frame_equal(result.frames[-1], ns["orders"][ns["orders"]["total"] > 10])
    seen = result.thread.messages[2].parts[0].content
    assert "customers: 2 rows, read-only" in seen and "_hidden" not in seen
    select_schema = tools.tools["frames_select"].parameters["properties"]["table"]
    assert "enum" not in select_schema and "pattern" in select_schema


def test_each_run_lists_the_namespace_afresh_and_a_run_keeps_what_it_found() -> None:
    ns = namespace()

    def model(request: ModelRequest) -> Reply | str:
        turn = sum(1 for m in request.messages if m.role == "assistant")
        if turn == 0:
            return Reply("", [("frames_list_tables", {})])
        if turn == 1:
            ns["late"] = pd.DataFrame({"x": [1]})  # defined while the run goes on
            return Reply("", [("frames_select", {"table": "late"})])
        return "ok"

    agent = define_agent(
        name="a", model=FunctionModel(model), connectors=[frame_tools(namespace=ns)]
    )
    first = agent.run_sync("what is there?")
    late = next(r for r in first.thread.tool_results() if r.name == "frames_select")
    assert late.is_error and "unknown table 'late'" in late.content
    again = agent.run_sync("and now?")
    assert "late" in listed(again)
    del ns["orders"]
    assert "orders" not in listed(agent.run_sync("and now?"))


def test_namespace_frames_are_read_only_and_configured_tables_win() -> None:
    ns = namespace()
    mine = pd.DataFrame({"id": [9], "total": [1.0]})
    tools = frame_tools({"orders": {"frame": mine, "write": True}}, namespace=ns)
    update = {
        "table": "customers",
        "values": {"name": "Eve"},
        "filters": [{"column": "id", "op": "eq", "value": 1}],
    }
    model = ReplayModel(
        [Reply("", [("frames_update", update), ("frames_select", {"table": "orders"})]), "ok"]
    )
    result = define_agent(name="a", model=model, connectors=[tools]).run_sync("edit")
    refused, selected = list(result.thread.tool_results())
    # the model is told which table it may write; no card asks the user to approve
    assert refused.error == (
        "Invalid arguments for 'frames_update': table: 'customers' is not one of ['orders']"
    )
    assert result.status == "complete" and result.thread.pending == []
    assert ns["customers"]["name"].tolist() == ["Ada", "Bob"]
    assert_frame_equal(selected.data, mine)  # the configured frame, not the variable


def test_at_most_the_documented_number_are_listed() -> None:
    ns = {f"frame_{i:02d}": pd.DataFrame({"i": [i]}) for i in range(NAMESPACE_FRAMES + 5)}
    last = f"frame_{NAMESPACE_FRAMES + 4:02d}"
    model = ReplayModel(
        [Reply("", [("frames_list_tables", {}), ("frames_select", {"table": last})]), "ok"]
    )
    agent = define_agent(name="a", model=model, connectors=[frame_tools(namespace=ns)])
    result = agent.run_sync("list")
    assert listed(result) == sorted(ns)[:NAMESPACE_FRAMES]
    listing, select = list(result.thread.tool_results())
    assert "5 more DataFrame(s) in the user's namespace are not listed" in listing.content
    assert select.is_error and f"unknown table {last!r}" in select.content


def test_namespace_true_reads_ipythons_namespace() -> None:
    shell = InteractiveShell.instance()
    shell.user_ns["ns_orders"] = pd.DataFrame({"id": [1]})
    try:
        model = ReplayModel([Reply("", [("frames_list_tables", {})]), "ok"])
        agent = define_agent(name="a", model=model, connectors=[frame_tools(namespace=True)])
        assert "ns_orders" in listed(agent.run_sync("list"))
    finally:
        del shell.user_ns["ns_orders"]


def test_namespace_true_outside_ipython_says_to_pass_a_mapping(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("IPython.get_ipython", lambda: None)
    with pytest.raises(
        UserError, match=r"pass the mapping to read: frame_tools\(namespace=globals"
    ):
        frame_tools(namespace=True)
    with pytest.raises(UserError, match="namespace= takes True"):
        frame_tools(namespace="globals")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="or pass namespace=True"):
        frame_tools()


def test_an_exported_namespace_call_reads_the_variable_of_that_name(tmp_path: Any) -> None:
    import nbformat

    ns = namespace()
    model = ReplayModel([Reply("", [("frames_select", {"table": "customers"})]), "ok"])
    agent = define_agent(name="a", model=model, connectors=[frame_tools(namespace=ns)])
    thread_id = agent.run_sync("who?").thread_id
    nb = nbformat.read(agent.export(thread_id, tmp_path / "t.ipynb"), as_version=4)
    run: dict[str, Any] = {"customers": ns["customers"]}
    for cell in nb.cells:
        if cell.cell_type == "code":
            exec(cell.source, run)
    assert_frame_equal(run["result_1"], agent.thread(thread_id).frames[0])
