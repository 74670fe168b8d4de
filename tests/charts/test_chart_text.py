"""Chart text is text: titles, axis names, category and series names are drawn exactly as the
model or the data wrote them. Bad math markup (``$\\foo$``, an unbalanced ``{``, a long nested
``\\frac``) is neither parsed as mathtext nor sent to TeX, so it fails no run and no view: live,
the static HTML, and a thread loaded again in a new process."""

from __future__ import annotations

import base64
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from loom_nb import ReplayModel, Reply, ToolCall, define_agent
from loom_nb.charts import Chart, chart_tools
from loom_nb.frames import frame_tools
from loom_nb.notebook.history import history_html
from loom_nb.sqlite import sqlite_store
from tests.charts._chart_data import PNG, draw, results

DEEP = "$" + "\\frac{1}{" * 12 + "x" + "}" * 12 + "$"  # 122 characters of nested fractions
HOSTILE = [
    "$\\foo$",
    "{unbalanced",
    "$x^{2$",
    "a $ b $ c",
    "100% \\\\ _^#&~",
    "$$",
    "<img src=x onerror=alert(1)>",
]
TITLE = "Totals of $\\foo$ and {" + DEEP  # under the schema's 200 characters
LONG = "$" + "\\frac{1}{" * 40 + "x" + "}" * 40 + "$"  # a value longer than a label holds


def hostile_rows(x: str = "$\\x{", y: str = "$\\bad y$", color: str = "{group$") -> pd.DataFrame:
    """Hostile values; hostile column names too (a custom tool's result may have any: the axes'
    and the legend's names)."""
    values = [*HOSTILE, LONG]
    return pd.DataFrame(
        {
            x: values,
            y: [float(i + 1) for i in range(len(values))],
            color: [values[i % 4] for i in range(len(values))],
        }
    )


@pytest.fixture
def drawn_text(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, Any]]]:
    """Every string the Agg renderer draws, with how it was asked to read it (False: as
    written; True: mathtext; "TeX"). ``text.usetex`` is on, as a user may have set it: no
    chart text may go to TeX."""
    import matplotlib
    from matplotlib.backends.backend_agg import RendererAgg

    seen: list[tuple[str, Any]] = []
    real = RendererAgg.draw_text

    def spy(self: Any, gc: Any, x: Any, y: Any, s: str, prop: Any, angle: Any, *a: Any, **k: Any):
        ismath = k.get("ismath", a[0] if a else False)
        seen.append((s, ismath))
        return real(self, gc, x, y, s, prop, angle, *a, **k)

    monkeypatch.setattr(RendererAgg, "draw_text", spy)
    with matplotlib.rc_context({"text.usetex": True}):
        yield seen


def literal(seen: list[tuple[str, Any]]) -> set[str]:
    return {s for s, ismath in seen if ismath is False}


@pytest.mark.parametrize("kind", ["bar", "line", "scatter"])
async def test_hostile_titles_names_and_values_are_drawn_as_written(
    kind: str, drawn_text: list[tuple[str, Any]]
):
    found = results(("c", "frames_select", hostile_rows()))
    out = await draw(
        found, result="c", kind=kind, x="$\\x{", y="$\\bad y$", color="{group$", title=TITLE
    )
    assert out.chart is not None and not out.is_error
    chart = Chart(out.chart)
    assert chart.png().startswith(PNG)
    shown = literal(drawn_text)
    expected = {TITLE, "$\\x{", "$\\bad y$", "{group$", *HOSTILE[:4]}  # the legend: 4 series
    if kind == "bar":  # categories on the x axis
        expected |= {*HOSTILE, LONG[:39] + "…"}
    assert expected <= shown, expected - shown
    hostile = {TITLE, *HOSTILE, "$\\x{", "$\\bad y$", "{group$"}
    assert not [s for s, ismath in drawn_text if ismath and s in hostile]
    [ax] = chart.figure().axes
    assert ax.get_title() == TITLE  # the text is kept whole; only its drawing is literal


async def test_a_histogram_of_a_hostile_column_and_its_notes_draw_as_written(
    drawn_text: list[tuple[str, Any]],
):
    frame = pd.DataFrame({"$\\n{": [1.0, 2.0, None, 4.0], "{k$": ["$a", "$b", "$a", "{"]})
    out = await draw(
        results(("c", "t", frame)), result="c", kind="histogram", x="$\\n{", color="{k$"
    )
    assert out.chart is not None
    assert Chart(out.chart).png().startswith(PNG)
    shown = literal(drawn_text)
    assert {"rows by $\\n{", "$\\n{", "{k$", "$a", "$b", "{"} <= shown, shown
    assert "1 row without $\\n{ not shown" in shown  # the note under the chart


def bar_agent(db: Path, replies: bool = True) -> Any:
    model = ReplayModel(
        [
            Reply("Reading.", [ToolCall("c1", "frames_select", {"table": "t"})]),
            Reply(
                "Drawing.",
                [
                    ToolCall(
                        "c2",
                        "chart",
                        {
                            "result": "c1",
                            "kind": "bar",
                            "x": "status",
                            "y": "n",
                            "color": "grp",
                            "title": TITLE,
                        },
                    )
                ],
            ),
            "Drawn.",
        ]
        if replies
        else []
    )
    return define_agent(
        name="a",
        model=model,
        store=sqlite_store(db),
        connectors=[frame_tools({"t": hostile_rows("status", "n", "grp")}), chart_tools()],
    )


def _pngs(html: str) -> list[bytes]:
    return [base64.b64decode(b) for b in re.findall(r'src="data:image/png;base64,([^"]+)"', html)]


def test_a_live_run_with_a_hostile_chart_completes_and_every_view_draws_it(tmp_path: Path):
    from loom_nb.notebook.widgets import ThreadView

    agent = bar_agent(tmp_path / "loom.db")
    view = ThreadView(agent_name="a")
    result = agent.run_sync("chart it", on_event=view.on_event)  # the live view draws it
    assert result.output == "Drawn." and result.error is None and len(result.charts) == 1
    [image] = [w for w in view.body.children if "loom-chart" in w._dom_classes]
    [live] = _pngs(image.value)
    assert live.startswith(PNG)
    [static] = _pngs(history_html(result.thread.messages, rows=10))  # %loom show, saved HTML
    assert static == live

    # a new process on the same file, as after a kernel restart: the thread draws again
    code = f"""
import sys
from tests.charts.test_chart_text import bar_agent, _pngs
from loom_nb.notebook.history import history_html
from pathlib import Path
thread = bar_agent(Path({str(tmp_path / "loom.db")!r}), replies=False).thread({result.thread_id!r})
[chart] = thread.charts
[image] = _pngs(history_html(thread.messages, rows=10))
sys.stdout.buffer.write(image if image == chart.png() else b"differs")
"""
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        check=True,
        cwd=Path(__file__).parents[2],
    )
    assert done.stdout == live
