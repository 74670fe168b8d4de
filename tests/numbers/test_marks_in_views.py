"""An answer's numbers in no result are marked in every view: the live widget, a saved
thread's view, the static HTML copy, the terminal text and the export; matched numbers say
where they came from when hovered. Hostile text in an answer stays inert."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell

from loom_nb import ReplayModel, Reply, define_agent, memory_store, tool, trace_numbers
from loom_nb.notebook import session
from loom_nb.notebook._html import TABLE_STYLE, markdown_html
from loom_nb.notebook._static import thread_text
from loom_nb.notebook.text import TextView
from loom_nb.notebook.widgets import ThreadView
from tests.notebook.hostile import HOSTILE_LINE, problems, visible_text

ANSWER = "The two orders total $200.50; the biggest was $120. Next month: $999."


@tool
def order_totals() -> list[dict[str, float]]:
    """The orders and their totals."""
    return [{"order": 1, "total": 120.0}, {"order": 2, "total": 80.5}]


def _run(answer: str = ANSWER, **view: object):  # type: ignore[no-untyped-def]
    model = ReplayModel([Reply("Looking.", tool_calls=[("order_totals", {})]), answer])
    agent = define_agent(name="a", model=model, tools=[order_totals], store=memory_store())
    live = ThreadView(agent_name="a", tools=agent.tools)
    result = agent.run_sync("What do the orders total?", on_event=live.on_event)
    live.finish(result, None)
    return agent, result, live


def _answer_html(view: ThreadView) -> str:
    return "".join(
        getattr(w, "value", "")
        for w in view.body.children
        if "loom-assistant" in getattr(w, "_dom_classes", ())
    )


def test_the_live_widget_marks_the_number_in_no_result_and_titles_the_others() -> None:
    _, _, live = _run()
    drawn = _answer_html(live)
    assert "$999</span>" in drawn and "(in no result)" in visible_text(drawn)
    assert visible_text(drawn).count("in no result") == 1
    # the matched ones, in a fold under the answer: where each came from
    assert "2 numbers traced to the results" in visible_text(drawn)
    assert "$200.50: a column's sum in call_" in visible_text(drawn)
    assert "$120: shown in call_" in visible_text(drawn)


def test_a_saved_thread_and_its_static_copy_keep_the_marks() -> None:
    agent, result, live = _run()
    saved = ThreadView(agent_name="a", tools=agent.tools)
    saved.render(agent.thread(result.thread_id))
    history = saved.body.children[0].value
    assert "(in no result)" in visible_text(history) and "$999" in history
    for static in (saved.static_html(), live.static_html()):
        text = visible_text(static)
        assert "$999 (in no result)" in text
        assert "$200.50 (in no result)" not in text and "$120 (in no result)" not in text


def test_the_terminal_view_lists_the_numbers_in_no_result() -> None:
    import io

    agent, result, live = _run()
    out = io.StringIO()
    TextView(title="a", out=out).render(agent.thread(result.thread_id))
    assert "  ⚠ in no result: $999\n" in out.getvalue()
    assert "⚠ in no result: $999" in live.static_text()
    thread = agent.thread(result.thread_id)
    printed = thread_text("a", thread.id, thread.messages, [], [], 10)
    assert printed.count("in no result") == 1


def test_the_export_says_which_numbers_are_in_no_result(tmp_path: Path) -> None:
    agent, result, _ = _run()
    path = agent.export(result.thread_id, tmp_path / "t.ipynb")
    cells = json.loads(path.read_text())["cells"]
    said = [c for c in cells if c["cell_type"] == "markdown" and "$200.50" in "".join(c["source"])]
    assert len(said) == 1
    assert "loom_nb: in no result:* `$999`" in "".join(said[0]["source"])


def test_hostile_text_around_the_numbers_stays_inert() -> None:
    answer = f"Total $200.50 {HOSTILE_LINE} and $999 {HOSTILE_LINE}"
    _, result, live = _run(answer)
    static = live.static_html().removeprefix(TABLE_STYLE)  # the project's own stylesheet
    for fragment in (_answer_html(live), static):
        assert problems(fragment) == []
        assert "$999 (in no result)" in visible_text(fragment)
    traced = [n for n in trace_numbers(result.thread) if n.rule is None]
    assert "$999" in [n.text for n in traced]
    assert problems(markdown_html(HOSTILE_LINE, traced)) == []


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    sh = InteractiveShell.instance()
    sh.run_cell("%load_ext loom_nb", store_history=False)
    yield sh
    sh.run_cell("%config LoomMagics.display = 'text'", store_history=False)
    sh.user_ns.pop("counted", None)
    session(sh).current.pop("counted", None)


def _marks(shown: str) -> list[bool]:
    """Whether ``shown`` (HTML or text) marks a number in no result, and says where the
    others came from."""
    text = visible_text(shown) if shown.lstrip().startswith("<") else shown
    return ["in no result" in text, "traced to the results" in text or "shown in call_" in text]


@pytest.mark.parametrize("mode", ["warn", "off"])
def test_off_marks_no_number_in_any_view_of_the_agents_threads(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str], tmp_path: Path, mode: str
) -> None:
    model = ReplayModel([Reply("Looking.", tool_calls=[("order_totals", {})]), ANSWER])
    shell.user_ns["counted"] = define_agent(
        name="counted", model=model, tools=[order_totals], store=memory_store(), check_numbers=mode
    )
    marked = mode != "off"
    html_marks = [marked, marked]
    shell.run_cell("%config LoomMagics.display = 'widgets'", store_history=False)
    assert shell.run_cell("%%loom counted --new\nWhat do the orders total?").success
    live = session(shell).last_view
    assert isinstance(live, ThreadView) and live.thread_id is not None
    shown = {"live widget": _answer_html(live), "live static HTML": live.static_html()}
    assert shell.run_cell(f"%loom show {live.thread_id}").success
    saved = session(shell).last_view
    assert isinstance(saved, ThreadView) and saved is not live
    shown |= {"%loom show": saved.body.children[0].value, "its static HTML": saved.static_html()}
    for where, html in shown.items():
        assert _marks(html) == html_marks, where
    for where, text in (("live", live.static_text()), ("%loom show", saved.static_text())):
        assert _marks(text)[0] is marked, where
    shell.run_cell("%config LoomMagics.display = 'text'", store_history=False)
    capsys.readouterr()
    assert shell.run_cell(f"%loom show {live.thread_id}").success
    printed = capsys.readouterr().out
    assert "$999" in printed and _marks(printed)[0] is marked
    path = tmp_path / "t.ipynb"
    assert shell.run_cell(f"%loom export {live.thread_id} --to {path}").success
    said = "".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"])
    assert "$999" in said and ("in no result" in said) is marked
