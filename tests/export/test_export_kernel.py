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
