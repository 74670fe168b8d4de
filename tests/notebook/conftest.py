"""Kernels with ipykernel 6.31 / 7.3 / 7.4 for the notebook tests (see nb_kernels.py), and an
in-process IPython shell with the extension and a test agent (``shell``)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from IPython.core.interactiveshell import InteractiveShell

from loom_nb import ReplayModel, define_agent, tool
from loom_nb.notebook import session as loom_session
from tests.conftest import require
from tests.notebook.nb_kernels import VERSIONS, build


@pytest.fixture(scope="session", params=list(VERSIONS), ids=[f"ipykernel-{v}" for v in VERSIONS])
def kernel(request: pytest.FixtureRequest) -> tuple[str, Path]:
    """(kernel name, kernelspec folder) for each ipykernel version."""
    try:
        return build(request.param)
    except (subprocess.SubprocessError, OSError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        require(False, f"could not install ipykernel {request.param}: {detail[-300:]}")
        raise


@pytest.fixture
def shell(capsys: pytest.CaptureFixture[str]) -> Iterator[InteractiveShell]:
    sh = InteractiveShell.instance()
    sh.run_cell("%load_ext loom_nb", store_history=False)
    sh.run_cell("%config LoomMagics.display = 'text'")
    sh.run_cell("%config LoomMagics.default_agent = ''")
    written: list[str] = []

    @tool
    def orders(min_total: float) -> pd.DataFrame:
        "Orders above min_total."
        df = pd.DataFrame({"id": [1, 2, 3], "total": [50.0, 150.0, 250.0]})
        return df[df.total > min_total]

    @tool(needs_approval=True, preview=lambda a: {"rows": [{"subject": a["subject"]}]})
    def insert_ticket(subject: str) -> str:
        "Insert a ticket."
        written.append(subject)
        return f"ticket {subject!r} inserted"

    model = ReplayModel([])
    agent = define_agent(name="analyst", model=model, tools=[orders, insert_ticket])
    sh.user_ns.update(analyst=agent, model=model, written=written, threshold=100)
    capsys.readouterr()
    yield sh
    s = loom_session(sh)
    s.current.clear()
    for name in ("analyst", "model", "written", "threshold", "other", "big", "all_", "res"):
        sh.user_ns.pop(name, None)
