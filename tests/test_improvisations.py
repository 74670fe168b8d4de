"""Each walkthrough survives what a person tries beside its script, in a real kernel (nbclient,
offline): running each cell twice, Run All twice in one kernel, a question of their own at the
end, and (the quickstart) clicking the resumed card it invites a click on.

The click here is the button's own ``.click()`` in the kernel, the handler a mouse click runs;
tests/notebook/test_browser.py::test_quickstart_click_on_the_resumed_card clicks it in chromium.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.test_notebooks import ALL, NOTEBOOKS, offline_env, runner, text_of

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

#: The agent each walkthrough talks to last, and a question of the person's own for it.
LAST_AGENT = {
    "01-quickstart.ipynb": "analyst",
    "02-supabase.ipynb": "ada",
    "03-your-own-connector.ipynb": "billing_bot",
    "04-real-models.ipynb": "analyst",
    "05-exploration.ipynb": "analyst",
    "06-rules-and-questions.ipynb": "cleaner",
    "07-evals.ipynb": "analyst",
}
OWN_QUESTION = "Thanks! What else should I look at?"


def _read(name: str) -> Any:
    return nbformat.read(NOTEBOOKS / name, as_version=4)


def _run(nb: Any, tmp_path: Path) -> Any:
    return runner.execute(nb, tmp_path / "work", env=offline_env(tmp_path))


def _complaints(nb: Any) -> list[str]:
    """What a person would read as something gone wrong: errors, and text on stderr (red)."""
    found = []
    for c in nb.cells:
        for o in c.get("outputs", []) if c.cell_type == "code" else []:
            if o.output_type == "error":
                found.append(f"{c.source[:40]!r}: {o.ename}: {o.evalue}")
            elif (o.output_type == "stream" and o.name == "stderr") or "already loaded" in o.get(
                "text", ""
            ):
                found.append(f"{c.source[:40]!r}: {o.text}")
    return found


@pytest.mark.parametrize("name", ALL)
def test_each_cell_run_twice(name: str, tmp_path: Path) -> None:
    """Every code cell run a second time right after the first: nothing fails or warns, and a
    ``%%loom`` cell whose run waits for approval shows its card again instead of asking twice."""
    nb = _read(name)
    cells = []
    for c in nb.cells:
        cells.append(c)
        if c.cell_type == "code":
            cells.append(copy.deepcopy(c))
    nb.cells = cells
    nb = _run(nb, tmp_path)
    assert _complaints(nb) == []
    if name == "01-quickstart.ipynb":  # its writes wait: the second run shows the card again
        again = [c for c in nb.cells if "was not sent again" in text_of(c)]
        assert [c.source.splitlines()[1] for c in again] == [
            "Flag them as priority.",
            "Please cancel order 7.",
        ]


@pytest.mark.parametrize("name", ALL)
def test_run_all_twice(name: str, tmp_path: Path) -> None:
    """Run All, then Run All again in the same kernel (Run All restarts nothing): the second
    pass says nothing the first did not, no "extension is already loaded" either."""
    nb = _read(name)
    second = copy.deepcopy(nb.cells)
    for c in second:
        c.metadata.pop("tags", None)  # the restart is the person's, in the first pass
    nb.cells = nb.cells + second
    nb = _run(nb, tmp_path)
    assert _complaints(nb) == []
    loads = [c for c in nb.cells if c.cell_type == "code" and "%load_ext loom_nb" in c.source]
    assert len(loads) >= 2 and all(not text_of(c).strip() for c in loads)


@pytest.mark.parametrize("name", ALL)
def test_continue_the_thread_at_the_end(name: str, tmp_path: Path) -> None:
    """A ``%%loom`` cell of the person's own after the last cell continues the thread: the
    stand-in answers in words (that it is a script), the cell does not fail."""
    nb = _read(name)
    nb.cells.append(nbformat.v4.new_code_cell(f"%%loom {LAST_AGENT[name]}\n{OWN_QUESTION}"))
    nb = _run(nb, tmp_path)
    assert _complaints(nb) == []
    shown = text_of(nb.cells[-1])
    assert f"you: {OWN_QUESTION}" in shown
    assert "assistant:" in shown.split(OWN_QUESTION, 1)[1]


def test_quickstart_click_on_the_resumed_card(tmp_path: Path) -> None:
    """After the restart the quickstart invites a click on the resumed card: clicked, the next
    cell (the line-magic approval) waits for that run instead of failing, and order 7 is
    cancelled once."""
    nb = _read("01-quickstart.ipynb")
    [at] = [i for i, c in enumerate(nb.cells) if c.source.startswith("waiting = analyst")]
    click = (
        "from loom_nb.notebook import session\n"
        "session().last_view.cards[0].approve_button.click()  # the person's click"
    )
    nb.cells.insert(at + 1, nbformat.v4.new_code_cell(click))
    nb = _run(nb, tmp_path)
    assert _complaints(nb) == []
    [approve] = [c for c in nb.cells if "pending = analyst.thread" in c.source]
    assert text_of(approve).strip() == "Decided on the card above."
    assert "cancelled" in text_of(next(c for c in nb.cells if "orders.id == 7" in c.source))
    from tests.test_notebooks import threads

    [thread] = threads(tmp_path / "work" / ".loom" / "loom.db")
    assert not thread.get("pending")
    results = [p for m in thread["messages"] for p in m["parts"] if p["kind"] == "tool_result"]
    assert [r.get("approval") for r in results] == [None, "approved", "approved"]
