"""``%loom export [ID] [--to PATH]`` through a real IPython shell (in-process, text display)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from IPython.core.interactiveshell import InteractiveShell

from loom_nb.notebook import session as loom_session
from tests.export._threads import agent_for, script
from tests.frames._orders import orders_frame


@pytest.fixture
def shell(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Iterator[InteractiveShell]:
    sh = InteractiveShell.instance()
    sh.run_cell("%load_ext loom_nb", store_history=False)
    sh.run_cell("%config LoomMagics.display = 'text'", store_history=False)
    sh.run_cell("%config LoomMagics.default_agent = ''", store_history=False)
    sh.user_ns["analyst"] = agent_for(script(5, calls=3), orders_frame())
    cwd = Path.cwd()
    os.chdir(tmp_path)
    capsys.readouterr()
    yield sh
    os.chdir(cwd)
    loom_session(sh).current.clear()
    for name in ("analyst", "__session__"):
        sh.user_ns.pop(name, None)


def run(sh: InteractiveShell, code: str) -> None:
    result = sh.run_cell(code, store_history=False)
    error = result.error_in_exec or result.error_before_exec
    assert error is None, f"{type(error).__name__}: {error}"


def error(sh: InteractiveShell, code: str) -> str:
    result = sh.run_cell(code, store_history=False)
    exc = result.error_in_exec or result.error_before_exec
    assert exc is not None and type(exc).__name__ == "UsageError", exc
    return str(exc)


def test_the_current_thread_goes_next_to_the_notebook_under_its_title(
    shell: InteractiveShell, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(shell, "%%loom analyst\nWhich orders are open, by segment?")
    (tmp_path / "work").mkdir()
    shell.user_ns["__session__"] = str(tmp_path / "work" / "analysis.ipynb")  # Jupyter sets it
    capsys.readouterr()
    run(shell, "%loom export")
    path = tmp_path / "work" / "which-orders-are-open-by-segment.ipynb"
    assert capsys.readouterr().out.strip().endswith(f"to {path}")
    nb = nbformat.read(path, as_version=4)
    thread_id = loom_session(shell).current["analyst"]
    assert nb.metadata["loom_nb"]["thread_id"] == thread_id

    run(shell, "%loom export")  # again: the same file, this thread's export as loom_nb wrote it
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == [path.name]

    nb.cells.append(nbformat.v4.new_code_cell("my_work = 1"))  # the user edits the export
    nbformat.write(nb, path)
    edited = path.read_text()
    capsys.readouterr()
    run(shell, "%loom export")
    beside = tmp_path / "work" / "which-orders-are-open-by-segment-2.ipynb"
    out = capsys.readouterr().out
    assert f"to {beside}\n" in out
    assert f"{path} was left as it is: someone changed it since loom_nb wrote it" in out
    assert path.read_text() == edited
    assert nbformat.read(beside, as_version=4).metadata["loom_nb"]["thread_id"] == thread_id

    other = tmp_path / "work" / "notes.ipynb"
    other.write_text("{}")  # someone else's file, named with --to: left alone too
    run(shell, f"%loom export --to {other}")
    assert other.read_text() == "{}"
    assert (tmp_path / "work" / "notes-2.ipynb").exists()


def test_to_names_the_file_and_its_format(shell: InteractiveShell, tmp_path: Path) -> None:
    run(shell, "%%loom analyst\nExplore.")
    thread_id = loom_session(shell).current["analyst"]
    run(shell, f"%loom export {thread_id} --to out/explore.py")
    assert (tmp_path / "out" / "explore.py").read_text().count("# %%") > 3
    run(shell, "%loom export --to=explore.md")
    assert "**You:**" in (tmp_path / "explore.md").read_text()
    assert "--to needs a value" in error(shell, "%loom export --to")
    assert "name a .ipynb notebook" in error(shell, "%loom export --to x.txt")


def test_without_a_thread_it_says_how_to_name_one(shell: InteractiveShell) -> None:
    assert "%loom export ID" in error(shell, "%loom export")
    assert "no thread 'nope'" in error(shell, "%loom export nope")


def test_two_threads_of_one_title_get_a_file_each(
    shell: InteractiveShell, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shell.user_ns["analyst"] = agent_for(script(5, calls=1) + script(6, calls=1), orders_frame())
    run(shell, "%%loom analyst\nOpen orders?")
    run(shell, "%loom export")
    run(shell, "%loom new analyst")
    run(shell, "%%loom analyst\nOpen orders?")
    capsys.readouterr()
    run(shell, "%loom export")
    first, second = tmp_path / "open-orders.ipynb", tmp_path / "open-orders-2.ipynb"
    out = capsys.readouterr().out
    assert f"to {second}\n{first} was left as it is: it holds the export of another thread" in out
    ids = {nbformat.read(p, as_version=4).metadata["loom_nb"]["thread_id"] for p in (first, second)}
    assert len(ids) == 2
