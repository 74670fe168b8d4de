"""Export round trip in fresh kernels: random scripted threads over frames, each exported and
run by nbclient in a new kernel after a first cell that defines ``orders``; every result equals
the frame the thread holds (``assert_frame_equal``)."""

from __future__ import annotations

from pathlib import Path

import jupytext
import nbformat
import pytest
from pandas.testing import assert_frame_equal

from loom_nb.sqlite import sqlite_store
from tests.export._threads import agent_for, frames_by_variable, run_thread, script
from tests.frames._orders import orders_frame
from tests.notebook.nb_kernels import exported_results

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.mark.parametrize(("seed", "suffix"), [(11, ".ipynb"), (12, ".ipynb"), (13, ".py")])
def test_an_exported_thread_run_in_a_fresh_kernel_gives_the_threads_frames(
    tmp_path: Path, seed: int, suffix: str
) -> None:
    agent = agent_for(script(seed, calls=10), orders_frame(), sqlite_store(tmp_path / "loom.db"))
    thread = agent.thread(run_thread(agent).thread_id)
    expected = frames_by_variable(thread)
    assert expected

    path = agent.export(thread.id, tmp_path / f"export{suffix}")
    nb = nbformat.read(path, as_version=4) if suffix == ".ipynb" else jupytext.read(path)
    orders_frame().to_pickle(tmp_path / "orders.pkl")
    setup = 'import pandas as pd\norders = pd.read_pickle("orders.pkl")'
    got = exported_results(nb, setup, tmp_path)
    assert set(expected) <= set(got)
    for variable, frame in expected.items():
        assert_frame_equal(got[variable], frame, obj=variable)


def test_an_exported_thread_with_a_join_a_percentile_and_bins_gives_its_frames(
    tmp_path: Path,
) -> None:
    """The join (a merge on the declared keys), the percentile and the bins of a thread, as
    its export writes them, run in a fresh kernel: the same frames, every row of them."""
    import numpy as np
    import pandas as pd

    from loom_nb import ReplayModel, Reply, ToolCall, define_agent
    from loom_nb.charts import chart_tools
    from loom_nb.frames import frame_tools

    rng = np.random.default_rng(5)
    customers = pd.DataFrame({"id": np.arange(1, 41), "tier": rng.choice(["gold", "basic"], 40)})
    orders = pd.DataFrame(
        {
            "id": np.arange(300),
            "customer_id": pd.array(rng.choice([*range(1, 45), None], 300), dtype="Int64"),
            "total": rng.gamma(2.0, 30.0, 300).round(2),
        }
    )
    calls = [
        (
            "frames_aggregate",
            {
                "table": "orders",
                "join": ["customers"],
                "group_by": ["customers.tier"],
                "aggregates": [
                    {"fn": "sum", "column": "total"},
                    {"fn": "percentile", "column": "total", "p": 0.9},
                    {"fn": "std", "column": "total"},
                ],
            },
        ),
        (
            "frames_select",
            {
                "table": "orders",
                "join": ["customers"],
                "columns": ["id", "total", "customers.tier"],
                "filters": [{"column": "customers.tier", "op": "eq", "value": "gold"}],
            },
        ),
        ToolCall(
            "call_bins",
            "frames_aggregate",
            {"table": "orders", "group_by": [{"column": "total", "bins": 12}]},
        ),
        ("chart", {"result": "call_bins", "kind": "histogram", "x": "bin_total", "y": "count"}),
    ]
    tools = frame_tools(
        {"orders": orders, "customers": customers},
        max_rows=5,
        relationships={"orders.customer_id": "customers.id"},
    )
    agent = define_agent(
        name="analyst",
        model=ReplayModel([*(Reply("", [c]) for c in calls), "done"]),
        connectors=[tools, chart_tools()],
        store=sqlite_store(tmp_path / "loom.db"),
    )
    thread = agent.thread(agent.run_sync("revenue by tier").thread_id)
    assert not any(r.is_error for r in thread.tool_results())
    expected = frames_by_variable(thread)
    assert len(expected) == 3 and len(expected["result_2"]) > 5  # more than the model saw
    path = agent.export(thread.id, tmp_path / "export.ipynb")
    nb = nbformat.read(path, as_version=4)
    orders.to_pickle(tmp_path / "orders.pkl")
    customers.to_pickle(tmp_path / "customers.pkl")
    setup = (
        "import pandas as pd\n"
        'orders = pd.read_pickle("orders.pkl")\n'
        'customers = pd.read_pickle("customers.pkl")'
    )
    got = exported_results(nb, setup, tmp_path)
    for variable, frame in expected.items():
        assert_frame_equal(got[variable], frame, obj=variable)
    # The histogram of the bins: one bar per bin of the aggregate, as tall as its count.
    bins = expected["result_3"]
    bars = got["result_4"].axes[0].patches
    heights = {round(p.get_x(), 9): p.get_height() for p in bars if p.get_height()}
    assert heights == {
        round(b, 9): c for b, c in zip(bins["bin_total"], bins["count"], strict=True)
    }
    assert sum(p.get_height() for p in bars) == len(orders) == 300
