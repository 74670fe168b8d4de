"""The design example in a real kernel: a weekly aggregate drawn as a bar chart, present as a
PNG in the executed notebook, and drawn again by ``%loom resume`` in a new kernel.

Charts do not depend on the ipykernel version, so one kernel (the environment's) is enough.
"""

from __future__ import annotations

import base64
import importlib.util
import re
from pathlib import Path

import nbformat
import pytest

from tests.conftest import require
from tests.notebook.nb_kernels import execute, text_of, with_class

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

PNG = b"\x89PNG\r\n\x1a\n"

SETUP = """
%load_ext loom_nb
import pandas as pd
from loom_nb import define_agent, ReplayModel, Reply, ToolCall
from loom_nb.charts import chart_tools
from loom_nb.frames import frame_tools
from loom_nb.sqlite import sqlite_store

orders = pd.DataFrame({{
    "status": ["open", "open", "open", "closed", "open"],
    "total": [150.0, 120.0, 300.0, 500.0, 90.0],
    "created_at": pd.to_datetime(
        ["2024-01-01T10:00Z", "2024-01-03T10:00Z", "2024-01-09T10:00Z", "2024-01-02T10:00Z",
         "2024-01-02T10:00Z"]),
}})
weekly = {{"table": "orders", "group_by": [{{"column": "created_at", "bucket": "week"}}],
          "filters": [{{"column": "status", "op": "eq", "value": "open"}},
                      {{"column": "total", "op": "gt", "value": 100}}]}}
bar = {{"result": "call_weekly", "kind": "bar", "x": "week_created_at", "y": "count"}}
model = ReplayModel({replies})
analyst = define_agent(name="analyst", model=model, store=sqlite_store({db!r}),
                       connectors=[frame_tools({{"orders": orders}}), chart_tools()])
"""

REPLIES = """[
    Reply("By week.", [ToolCall("call_weekly", "frames_aggregate", weekly)]),
    Reply("Drawing.", [ToolCall("call_bar", "chart", bar)]),
    "Two open orders above 100 in the first week, one in the second.",
]"""


def _pngs_in(html: str) -> list[bytes]:
    found = re.findall(r'src="data:image/png;base64,([^"]+)"', html)
    return [base64.b64decode(b) for b in found]


@pytest.mark.parametrize("kernel", ["7.4"], indirect=True)
def test_the_chart_is_a_png_in_the_notebook_and_comes_back_after_a_restart(
    kernel: tuple[str, Path], tmp_path: Path
) -> None:
    require(importlib.util.find_spec("matplotlib") is not None, "matplotlib is not installed")
    db = str(tmp_path / "loom.db")
    first = execute(
        [
            SETUP.format(replies=REPLIES, db=db),
            "%%loom analyst --result r\nWhich orders above 100 are still open? Plot them by week.",
            "print(r.thread.id, len(r.charts))",
            "r.charts[0]",
        ],
        kernel,
        tmp_path,
    )
    thread_id, charts = text_of(first.cells[2]).split()
    assert charts == "1"
    # the live thread view: the chart as an image in the saved widget state
    [live] = with_class(first, "loom-chart")
    [image] = _pngs_in(live["value"])
    assert image.startswith(PNG)
    # a chart displayed on its own is an image/png output of the cell
    [output] = first.cells[3]["outputs"]
    assert base64.b64decode(output["data"]["image/png"]).startswith(PNG)
    assert output["data"]["text/plain"].startswith("<Chart bar chart · count by week_created_at")

    # A new kernel on the same file: %loom resume draws the chart again from the thread.
    second = execute(
        [
            SETUP.format(replies="[]", db=db),
            f"%loom resume {thread_id}",
            f"analyst.thread({thread_id!r}).charts[0]",
        ],
        kernel,
        tmp_path,
    )
    [history] = with_class(second, "loom-history")
    [again] = _pngs_in(history["value"])
    assert again.startswith(PNG)
    [output] = second.cells[2]["outputs"]
    assert base64.b64decode(output["data"]["image/png"]) == base64.b64decode(
        first.cells[3]["outputs"][0]["data"]["image/png"]
    )  # the same picture, drawn from the saved spec


ORDERS = (
    SETUP[SETUP.index("orders = ") : SETUP.index("weekly = ")].replace("{{", "{").replace("}}", "}")
)


@pytest.mark.parametrize("kernel", ["7.4"], indirect=True)
def test_an_exported_thread_draws_its_chart_in_a_fresh_kernel(
    kernel: tuple[str, Path], tmp_path: Path
) -> None:
    """``%loom export``, then the notebook run in a new kernel after a cell that defines
    ``orders``: the chart call's cell draws the chart (one PNG) from the weekly aggregate."""
    require(importlib.util.find_spec("matplotlib") is not None, "matplotlib is not installed")
    db = str(tmp_path / "loom.db")
    execute(
        [
            SETUP.format(replies=REPLIES, db=db),
            "%%loom analyst --result r\nWhich orders above 100 are still open? Plot them by week.",
            f"%loom export {{r.thread.id}} --to {str(tmp_path / 'export.ipynb')!r}",
        ],
        kernel,
        tmp_path,
    )
    exported = nbformat.read(tmp_path / "export.ipynb", as_version=4)
    code = [c.source for c in exported.cells if c.cell_type == "code"]
    run = execute(
        [
            "import pandas as pd\n" + ORDERS,
            *code,
            "print(type(result_2).__name__, len(result_2.axes[0].patches))",
        ],
        kernel,
        tmp_path,
    )
    [chart_cell] = [c for c in run.cells if "draw_chart(result_1" in c.source]
    [output] = chart_cell["outputs"]  # shown once, as the cell's result
    assert base64.b64decode(output["data"]["image/png"]).startswith(PNG)
    assert text_of(run.cells[-1]).split() == ["Figure", "2"]  # two weeks hold open orders


HOSTILE_SETUP = r"""
%load_ext loom_nb
import pandas as pd
from loom_nb import define_agent, ReplayModel, Reply, ToolCall
from loom_nb.charts import chart_tools
from loom_nb.frames import frame_tools
from loom_nb.sqlite import sqlite_store

values = ["$\\foo$", "{unbalanced", "$" + "\\frac{1}{" * 40 + "x" + "}" * 40 + "$", "a $ b"]
rows = pd.DataFrame({"status": values, "n": [1.0, 2.0, 3.0, 4.0], "grp": values})
bar = {"result": "c1", "kind": "bar", "x": "status", "y": "n", "color": "grp",
       "title": "Totals of $\\foo$ and {"}
model = ReplayModel(REPLIES)
analyst = define_agent(name="analyst", model=model, store=sqlite_store(DB),
                       connectors=[frame_tools({"rows": rows}), chart_tools()])
"""

HOSTILE_REPLIES = """[
    Reply("Reading.", [ToolCall("c1", "frames_select", {"table": "rows"})]),
    Reply("Drawing.", [ToolCall("c2", "chart", bar)]),
    "Drawn.",
]"""


@pytest.mark.parametrize("kernel", ["7.4"], indirect=True)
def test_a_chart_of_bad_math_markup_fails_no_run_and_no_view(
    kernel: tuple[str, Path], tmp_path: Path
) -> None:
    """A title and category values that are bad mathtext: the live run completes with its
    chart, ``%loom show`` draws it, and ``%loom resume`` in a new kernel draws it again."""
    require(importlib.util.find_spec("matplotlib") is not None, "matplotlib is not installed")

    def setup(replies: str) -> str:
        return HOSTILE_SETUP.replace("REPLIES", replies).replace("DB", repr(str(tmp_path / "l.db")))

    first = execute(
        [
            setup(HOSTILE_REPLIES),
            "%%loom analyst --result r\nChart the rows.",
            "print(r.thread.id, r.error, len(r.charts), r.output)",
            "%loom show",
        ],
        kernel,
        tmp_path,
    )
    thread_id, error, charts, output = text_of(first.cells[2]).split()
    assert (error, charts, output) == ("None", "1", "Drawn.")
    [live] = with_class(first, "loom-chart")
    [image] = _pngs_in(live["value"])
    assert image.startswith(PNG)
    assert not [o for c in first.cells for o in c["outputs"] if o["output_type"] == "error"]
    [shown] = with_class(first, "loom-history")  # %loom show's view
    assert _pngs_in(shown["value"]) == [image]
    static = [o["data"]["image/png"] for o in first.cells[3]["outputs"] if "image/png" in o["data"]]
    assert [base64.b64decode(p) for p in static] == [image]  # the static form's image output

    second = execute([setup("[]"), f"%loom resume {thread_id}"], kernel, tmp_path)
    assert not [o for c in second.cells for o in c["outputs"] if o["output_type"] == "error"]
    [history] = with_class(second, "loom-history")
    assert _pngs_in(history["value"]) == [image]
