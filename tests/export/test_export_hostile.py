"""Exports of threads whose every slot holds hostile text: line breaks of every kind
(``str.splitlines()`` breaks at \\v, \\f, \\x1c-\\x1e, \\x85, U+2028 and U+2029 too), other
controls, jupytext's cell markers, fences, magics, quotes and backslashes, and Python that
would write a file were it ever run. Each thread is exported as .ipynb, .py and .md and read
back by jupytext: the code cells are the very cells the exporter meant to write (equal syntax
trees); then the code of the export runs in IPython, in a folder of its own, after a cell that
defines the data, and writes nothing there."""

from __future__ import annotations

import ast
import json
import os
import pickle
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jupytext
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loom_nb import Message, TextPart, Thread, ToolCall
from loom_nb._code import LINE_BREAKS, variable_for
from loom_nb._export import export_thread, thread_cells
from loom_nb._messages import ToolResult
from loom_nb.charts import chart_tools
from loom_nb.frames import frame_tools
from loom_nb.supabase import supabase_tools

ROOT = Path(__file__).parents[2]
#: What would act if it ever became code: a file written by Python, a shell escape, a magic.
PAYLOADS = [
    "__import__('os').system('touch PWNED') #",
    "open('PWNED', 'w').write('x')",
    "!touch PWNED",
    "%system touch PWNED",
    "%%bash\ntouch PWNED",
]
MARKERS = [
    "# %%",
    "# %% [markdown]",
    "#%%",
    "# +",
    "# -",
    "+",
    "-",
    "# In[ ]:",
    "In[1]:",
    "<!-- #region -->",
    "<!-- #endregion -->",
    "<!-- #raw -->",
    "#region",
    "# endregion",
    "```python",
    "```",
    "~~~",
    "---",
    '"""',
    "'''",
    "\\",
    "$\\foo$",
    "<img src=x onerror=alert(1)>",
]
BREAKS = [*LINE_BREAKS, "\r\n", "\u202e", "\x00", "\x1b", "\ud800", "\t"]
ALPHABET = "".join(BREAKS) + "\"'\\#%!?`~<>-+{}[]()$ ab_"


def _fragment() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(PAYLOADS),
        st.sampled_from(MARKERS),
        st.sampled_from(BREAKS),
        st.text(alphabet=ALPHABET, max_size=5),
    )


hostile = st.lists(_fragment(), min_size=1, max_size=6).map("".join)
#: Table names the grammar allows, some of them names the export itself uses.
TABLES = ["orders", "pd", "class", "draw_chart", "mask", "postgrest_frame", "bucket_start"]


def orders() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "status": ["open", "a\u2028b", "# %%", None],
            "total": [1.0, 2.5, None, 4.0],
            "created_at": pd.to_datetime(
                ["2024-01-01", "2024-01-09", None, "2024-02-01"]
            ).tz_localize("Europe/Berlin"),
        }
    )


def make_client(ctx: Any) -> Any:  # never called: the export's code names it
    raise AssertionError("a Supabase request from an export test")


def tools(table: str) -> dict[str, Any]:
    frames = frame_tools({table: {"frame": orders(), "write": True}}, max_rows=10)
    base = supabase_tools(client=make_client, tables={"items": {"write": True}})
    return {**frames.tools, **chart_tools().tools, **base.tools}


@st.composite
def threads(draw: st.DrawFn) -> tuple[Thread, str]:
    text = lambda: draw(hostile)  # noqa: E731
    table = draw(st.sampled_from(TABLES))
    op = draw(st.sampled_from(["eq", "neq", "like", "ilike", "in", "gt"]))
    value: Any = [text(), text()] if op == "in" else text()
    column = "total" if op == "gt" else "status"
    if op == "gt":
        value = draw(st.floats(allow_nan=False, allow_infinity=False))
    select = {"table": table, "filters": [{"column": column, "op": op, "value": value}]}
    aggregate = {
        "table": table,
        "group_by": [{"column": "created_at", "bucket": "week"}],
        "aggregates": [{"fn": "count"}],
        "filters": [{"column": "status", "op": "like", "value": text()}],
    }
    chart = {"result": "c1", "kind": draw(st.sampled_from(["bar", "histogram", "line"]))}
    chart |= {"x": text(), "y": text(), "color": text(), "title": text()}
    update = {
        "table": table,
        "values": {"status": text()},
        "filters": [{"column": "status", "op": "eq", "value": text()}],
    }
    remote = {"table": "items", "filters": [{"column": "name", "op": "eq", "value": text()}]}
    remote_update = {
        "table": "items",
        "values": {"name": text()},
        "filters": [{"column": "id", "op": "eq", "value": 1}],
    }
    calls = [
        ToolCall("c1", "frames_select", select),
        ToolCall("c2", "frames_aggregate", aggregate),
        ToolCall("c3", "chart", chart),
        ToolCall("c4", "frames_update", update),
        ToolCall("c5", "frames_select", {"table": table, "columns": [text()]}),
        ToolCall("c6", text(), {text(): text()}),
        ToolCall("c7", "supabase_select", remote),
        ToolCall("c8", "supabase_update", remote_update),
        ToolCall("c9", "chart", {**chart, "result": "c2"}),
    ]
    error = json.dumps({"error": text()})
    results = [
        ToolResult("c1", "frames_select", "rows"),
        ToolResult("c2", "frames_aggregate", "rows"),
        ToolResult("c3", "chart", "drawn"),
        ToolResult("c4", "frames_update", error, is_error=True, approval="approved"),
        ToolResult("c5", "frames_select", error, is_error=True),
        ToolResult("c6", calls[5].name, error, is_error=True),
        ToolResult("c7", "supabase_select", "rows"),
        ToolResult(
            "c8",
            "supabase_update",
            "done",
            approval=draw(st.sampled_from(["approved", "rejected"])),
        ),
        ToolResult("c9", "chart", error, is_error=True),
    ]
    thread = Thread(
        text(),
        text(),
        title=text(),
        messages=[
            Message("user", [TextPart(text())]),
            Message("assistant", [TextPart(text()), *calls]),
            Message("tool", list(results)),
            Message("assistant", [TextPart(text())]),
        ],
    )
    return thread, table


def _trees(sources: list[str]) -> list[str]:
    flags = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    return [ast.dump(compile(s, "<cell>", "exec", flags)) for s in sources]


class Runner:
    """One IPython process that runs exports (``_run_export.py``)."""

    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.export._run_export"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=env,
        )

    def run(self, folder: Path, cells: list[str], frames: Path) -> int:
        assert self.process.stdin is not None and self.process.stdout is not None
        request = {"folder": str(folder), "cells": cells, "frames": str(frames)}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        assert answer, "the runner died"
        failed: int = json.loads(answer)["failed"]
        return failed

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)


@pytest.fixture(scope="module")
def runner() -> Iterator[Runner]:
    r = Runner()
    yield r
    r.close()


def _exported(thread: Thread, by_name: dict[str, Any], folder: Path) -> None:
    """Export as .ipynb, .py and .md; each, read back by jupytext, holds the meant code."""
    meant = [c.source for c in thread_cells(thread, by_name).cells if c.kind == "code"]
    assert len(meant) >= 5  # the setup, the frames and chart calls (others may be refused)
    for suffix in (".ipynb", ".py", ".md"):
        path = export_thread(thread, by_name, folder / f"export{suffix}")
        read = [c.source for c in jupytext.read(path).cells if c.cell_type == "code"]
        assert _trees(read) == _trees(meant), suffix


@settings(max_examples=30, deadline=None)
@given(threads())
def test_hostile_text_in_every_slot_stays_text_in_every_format(case: tuple[Thread, str]) -> None:
    thread, table = case
    with tempfile.TemporaryDirectory() as tmp:
        _exported(thread, tools(table), Path(tmp))


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(threads())
def test_running_an_export_of_hostile_text_writes_nothing(
    runner: Runner, case: tuple[Thread, str]
) -> None:
    thread, table = case
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _exported(thread, tools(table), folder)
        frames = folder / "frames.pkl"
        frames.write_bytes(pickle.dumps({variable_for(table): orders(), "context": {}}))
        before = sorted(p.name for p in folder.iterdir())
        script = jupytext.read(folder / "export.py")
        cells = [c.source for c in script.cells if c.cell_type == "code"]
        failed = runner.run(folder, cells, frames)
        assert sorted(p.name for p in folder.iterdir()) == before
        assert failed < len(cells) - 2  # the setup and most reads ran


@pytest.mark.slow
def test_the_runner_would_see_a_file_written(runner: Runner, tmp_path: Path) -> None:
    """The check above can fail: code that writes, run the same way, leaves its file."""
    frames = tmp_path / "frames.pkl"
    frames.write_bytes(pickle.dumps({}))
    assert runner.run(tmp_path, ["!touch PWNED", "x = 1"], frames) == 0
    assert (tmp_path / "PWNED").exists()
