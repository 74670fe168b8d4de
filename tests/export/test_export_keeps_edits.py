"""An export never writes over a user's work: a path whose file loom_nb did not write, or
wrote and someone changed since, keeps its file, and the export goes to the next free name
(``name-2.ipynb``); an export of the same thread as loom_nb wrote it is written over."""

from __future__ import annotations

from pathlib import Path

import jupytext
import nbformat
import pytest

from loom_nb import Reply
from loom_nb._export import written_by_loom
from tests.export._threads import agent_for, run_thread
from tests.frames._orders import orders_frame

SUFFIXES = [".ipynb", ".py", ".md"]


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_an_unchanged_export_of_the_thread_is_written_over(tmp_path: Path, suffix: str) -> None:
    agent = agent_for(
        [Reply("Looking.", [("frames_select", {"table": "orders"})]), "One."], orders_frame()
    )
    thread_id = run_thread(agent).thread_id
    path = tmp_path / "out" / f"t{suffix}"
    assert agent.export(thread_id, path) == path
    first = path.read_text()
    agent.model.add(Reply("Again.", [("frames_select", {"table": "orders"})]), "Two.")
    agent.run_sync("And again?", thread_id=thread_id)
    assert agent.export(thread_id, path) == path  # the thread grew: the same file, rewritten
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
    assert path.read_text() != first and "And again?" in path.read_text()


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_an_edited_export_keeps_its_edits_and_the_next_goes_beside_it(
    tmp_path: Path, suffix: str
) -> None:
    agent = agent_for(
        [Reply("Looking.", [("frames_select", {"table": "orders"})]), "One."], orders_frame()
    )
    thread_id = run_thread(agent).thread_id
    path = tmp_path / f"t{suffix}"
    agent.export(thread_id, path)
    notebook = jupytext.read(path)
    notebook.cells.append(nbformat.v4.new_code_cell("my_analysis = 42"))  # the user's work
    jupytext.write(notebook, path)
    edited = path.read_text()

    second = agent.export(thread_id, path)
    assert second == tmp_path / f"t-2{suffix}"
    assert path.read_text() == edited
    assert "my_analysis" not in second.read_text()
    # the next export replaces t-2 (as loom_nb wrote it), not the edited one
    assert agent.export(thread_id, path) == second
    assert path.read_text() == edited


def test_one_byte_changed_is_a_change(tmp_path: Path) -> None:
    agent = agent_for([Reply("", [("frames_select", {"table": "orders"})]), "ok"], orders_frame())
    thread_id = run_thread(agent).thread_id
    path = agent.export(thread_id, tmp_path / "t.py")
    path.write_text(path.read_text().replace("result_1 = ", "result_1  = ", 1))
    assert agent.export(thread_id, path) == tmp_path / "t-2.py"


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_a_file_loom_nb_did_not_write_is_left_alone(tmp_path: Path, suffix: str) -> None:
    agent = agent_for(
        [
            Reply("", [("frames_select", {"table": "orders"})]),
            "a",
            Reply("", [("frames_select", {"table": "orders"})]),
            "b",
        ],
        orders_frame(),
    )
    first, other = run_thread(agent).thread_id, run_thread(agent).thread_id
    mine = tmp_path / f"mine{suffix}"
    mine.write_text("my notes\n")
    assert agent.export(first, mine) == tmp_path / f"mine-2{suffix}"
    assert mine.read_text() == "my notes\n"

    # another thread's export as loom_nb wrote it holds nobody's work: --to writes over it
    theirs = agent.export(other, tmp_path / f"theirs{suffix}")
    assert agent.export(first, theirs) == theirs
    assert written_by_loom(theirs) == first
