"""What a ``%%loom`` cell reads before its run (one check, then the run's one load under its
lease) and what it says when the thread's calls wait, through a real IPython shell and a
real SQLite store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell

from loom_nb import ReplayModel, Reply, define_agent
from loom_nb.sqlite import SQLiteStore
from tests.notebook.test_magics import cell, error_of


class CountedStore(SQLiteStore):
    """A SQLite store that notes each read of a thread and each lease taken, in order."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.calls: list[str] = []

    def load(self, thread_id: str, *, user_id: str | None = None) -> Any:
        self.calls.append("load")
        return super().load(thread_id, user_id=user_id)

    def thread_version(self, thread_id: str, *, user_id: str | None = None) -> Any:
        self.calls.append("version")
        return super().thread_version(thread_id, user_id=user_id)

    def acquire_lease(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append("lease")
        return super().acquire_lease(*args, **kwargs)

    def append(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append("append")
        return super().append(*args, **kwargs)


def test_a_cell_checks_its_thread_once_and_the_run_loads_it_once(
    shell: InteractiveShell, tmp_path: Path
) -> None:
    store = CountedStore(tmp_path / "loom.db")
    model = ReplayModel(["First.", "Second."])
    shell.user_ns["analyst"] = define_agent(name="analyst", model=model, store=store)
    assert cell(shell, "%%loom analyst", "Hi").success
    store.calls.clear()
    r = cell(shell, "%%loom analyst --result res", "Again")
    assert r.success, error_of(r)
    assert shell.user_ns["res"].output == "Second."
    # before the user's message is appended: the cell's check, the lease, the run's one load
    # (the lease's keeper may renew it meanwhile); the kept thread is never loaded whole again
    before = store.calls[: store.calls.index("append")]
    taken = before.index("lease")
    assert before[:taken] == ["version"]
    assert [c for c in before[taken:] if c != "lease"] == ["version"]
    assert "load" not in store.calls


def test_a_cell_on_a_thread_whose_call_waits_says_how_to_decide_it(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    shell.user_ns["model"].add(Reply("Filing it.", [("insert_ticket", {"subject": "late"})]))
    assert cell(shell, "%%loom analyst --result res", "File a ticket").success
    [pending] = shell.user_ns["res"].pending
    thread = shell.user_ns["res"].thread_id
    capsys.readouterr()
    r = cell(shell, "%%loom analyst", "Something else")
    assert error_of(r) == (
        f"UsageError: thread {thread} waits for approval of insert_ticket ({pending.call_id}): "
        f"click Approve/Reject, or run %loom approve {pending.call_id} / %loom reject "
        f"{pending.call_id}, or start a new thread with --new"
    )
    assert capsys.readouterr().out == ""  # no view was opened for a prompt that was not sent
    saved = shell.user_ns["analyst"].thread(thread)
    assert [m.text for m in saved.messages if m.role == "user"] == ["File a ticket"]
    assert shell.user_ns["written"] == []
