"""Kernels with ipykernel 6.31 / 7.3 / 7.4 for the notebook tests (see nb_kernels.py), an
in-process IPython shell with the extension and a test agent (``shell``), and one whose agent
has a write that a stopped kernel left behind (``stopped_write``)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pytest
from IPython.core.interactiveshell import InteractiveShell

from loom_nb import CallState, ReplayModel, Reply, define_agent, tool
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


@pytest.fixture
def stopped_write(
    capsys: pytest.CaptureFixture[str],
) -> Iterator[Callable[..., InteractiveShell]]:
    """``stopped_write(state, holder=None)``: an in-process shell (text display) whose agent
    ``support`` stopped at one ``insert_ticket(subject="refund")`` write, which a kernel that
    is gone then left in ``state``, holding it as ``holder`` (for "running"). Nothing runs the
    thread now; the model answers "Noted." next. The namespace holds ``support``, ``written``
    (the subjects the write wrote), ``thread_id``, ``call`` and ``state``."""
    sh = InteractiveShell.instance()
    sh.run_cell("%load_ext loom_nb", store_history=False)
    sh.run_cell("%config LoomMagics.display = 'text'")

    def stopped(state: CallState, holder: str | None = None) -> InteractiveShell:
        written: list[str] = []

        @tool(needs_approval=True, preview=lambda a: {"rows": [{"subject": a["subject"]}]})
        def insert_ticket(subject: str) -> str:
            "Insert a ticket."
            written.append(subject)
            return f"ticket {subject!r} inserted"

        model = ReplayModel([Reply("Filing.", [("insert_ticket", {"subject": "refund"})])])
        agent = define_agent(name="support", model=model, tools=[insert_ticket])
        first = agent.run_sync("File a refund ticket")
        call_id = first.pending[0].call_id
        agent.store.update_calls(
            first.thread_id, [call_id], state, expect={"pending"}, holder=holder
        )
        model.add("Noted.")
        sh.user_ns.update(support=agent, written=written, thread_id=first.thread_id)
        sh.user_ns.update(call=call_id, state=state)
        capsys.readouterr()
        return sh

    yield stopped
    loom_session(sh).current.clear()
    for name in ("support", "written", "thread_id", "call", "state"):
        sh.user_ns.pop(name, None)
