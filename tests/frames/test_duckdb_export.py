"""Export of a thread whose frames DuckDB computed (a Parquet glob, joined to a DataFrame):
the notebook, run in a fresh kernel after a cell that defines only the DataFrame, reads the
glob again and gives every frame of the thread."""

from __future__ import annotations

from pathlib import Path

import duckdb
import nbformat
import pytest
from pandas.testing import assert_frame_equal

from loom_nb import ReplayModel, Reply, define_agent
from loom_nb.frames import frame_tools
from loom_nb.sqlite import sqlite_store
from tests.export._threads import frames_by_variable
from tests.frames.test_duckdb_contract import DRIVERS, TRIPS
from tests.notebook.nb_kernels import exported_results

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def test_an_exported_duckdb_thread_reruns_in_a_fresh_kernel(tmp_path: Path) -> None:
    (tmp_path / "trips").mkdir()
    for i in range(3):
        part = TRIPS.iloc[i * 20 : (i + 1) * 20]
        duckdb.from_df(part).write_parquet(str(tmp_path / "trips" / f"part-{i}.parquet"))
    calls = [
        (
            "frames_aggregate",
            {
                "table": "trips",
                "group_by": [{"column": "created_at", "bucket": "week"}],
                "aggregates": [{"fn": "count"}, {"fn": "sum", "column": "fare"}],
                "filters": [{"column": "created_at", "op": "gte", "value": "2024-03-04"}],
            },
        ),
        (
            "frames_select",
            {
                "table": "trips",
                "join": ["drivers"],
                "columns": ["id", "fare", "drivers.tier"],
                "filters": [{"column": "city", "op": "ilike", "value": "p%"}],
                "order": [{"column": "fare", "desc": True}],
            },
        ),
        (
            "frames_aggregate",
            {
                "table": "trips",
                "join": ["drivers"],
                "group_by": ["drivers.tier", {"column": "fare", "bins": 4}],
                "aggregates": [{"fn": "percentile", "column": "fare", "p": 0.9}],
            },
        ),
    ]
    tools = frame_tools(
        {"trips": {"path": str(tmp_path / "trips" / "*.parquet")}, "drivers": DRIVERS},
        max_rows=5,
        relationships={"trips.driver_id": "drivers.id"},
    )
    agent = define_agent(
        name="analyst",
        model=ReplayModel([*(Reply("", [c]) for c in calls), "done"]),
        connectors=[tools],
        store=sqlite_store(tmp_path / "loom.db"),
    )
    thread = agent.thread(agent.run_sync("fares by week").thread_id)
    assert not any(r.is_error for r in thread.tool_results())
    expected = frames_by_variable(thread)
    assert len(expected) == 3
    path = agent.export(thread.id, tmp_path / "export.ipynb")
    nb = nbformat.read(path, as_version=4)
    source = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "duckdb.read_parquet(" in source and "duckdb.execute(" in source
    DRIVERS.to_pickle(tmp_path / "drivers.pkl")
    got = exported_results(
        nb, 'import pandas as pd\ndrivers = pd.read_pickle("drivers.pkl")', tmp_path
    )
    for variable, frame in expected.items():
        assert_frame_equal(got[variable], frame, obj=variable)
