"""``%loom eval`` in real kernels: three saved threads marked as a suite with ``%loom eval
add``, then replayed by a second scripted model that gets one of them wrong; the report shows
as its HTML summary, and the suite is found again by a second kernel on the same store."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.notebook.nb_kernels import execute, text_of

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

SETUP = """
%load_ext loom_nb
import pandas as pd
from loom_nb import define_agent, ReplayModel, Reply
from loom_nb.frames import frame_tools
from loom_nb.sqlite import sqlite_store

orders = pd.DataFrame({{"id": [1, 2, 3, 4], "total": [50.0, 150.0, 250.0, 120.0]}})
data = frame_tools({{"orders": {{"frame": orders, "write": True}}}})

def above(t):
    flt = [{{"column": "total", "op": "gt", "value": t}}]
    return Reply("", [("frames_select", {{"table": "orders", "filters": flt}})])

first = [above(100), "Three.", above(200), "One.", above(0), "Four."]
second = ReplayModel([above(100), "Three.", above(250), "None.", above(0), "Four."],
                     name="second")
analyst = define_agent(name="analyst", model=ReplayModel({replies}), connectors=[data],
                       store=sqlite_store({db!r}))
"""


def test_a_suite_marked_and_replayed_by_a_second_model(kernel: tuple[str, Path], tmp_path: Path):
    db = str(tmp_path / "loom.db")
    nb = execute(
        [
            SETUP.format(replies="first", db=db),
            "%%loom analyst --new\nAbove 100?",
            "%%loom analyst --new\nAbove 200?",
            "%%loom analyst --new\nAll orders?",
            "ids = [t.id for t in analyst.threads()][::-1]\n"
            'get_ipython().run_line_magic("loom", "eval add " + " ".join(ids))',
            "%loom eval --model second",
            "report = _\nprint(report.to_frame()['equal'].tolist())\n"
            "print(report.threads[1].calls[0].missing_rows['id'].tolist())",
        ],
        kernel,
        tmp_path,
    )
    out = [text_of(c) for c in nb.cells]
    assert "Eval suite 'default' of analyst: 3 threads" in out[4]
    shown = nb.cells[5]["outputs"][0]["data"]
    assert "2 of 3 threads equal" in shown["text/html"]
    assert "<script" not in shown["text/html"]
    assert "[True, False, True]" in out[6]
    assert "[3]" in out[6]  # order 3 (250.0) is not above 250
    # another kernel on the same store finds the suite
    again = execute(
        [
            SETUP.format(replies="[]", db=db),
            "print(analyst.eval_suites()['default'] == [t.id for t in analyst.threads()][::-1])",
        ],
        kernel,
        tmp_path,
    )
    assert text_of(again.cells[1]).strip() == "True"
