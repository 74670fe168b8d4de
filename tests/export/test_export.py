"""``agent.export``: a thread as a notebook whose code, run after defining each table's
DataFrame, gives the very frames of the thread. Here the code runs in this process (quick, many
threads); ``test_export_kernel.py`` runs exported notebooks in fresh kernels."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import jupytext
import nbformat
import pandas as pd
import pytest
from pandas.testing import assert_frame_equal

from loom_nb import (
    Message,
    PendingApproval,
    ReplayModel,
    Reply,
    TextPart,
    Thread,
    ToolCall,
    UserError,
    define_agent,
    tool,
)
from loom_nb._export import _ipynb_text, _one_of_each_shape, thread_cells
from loom_nb._messages import CallState
from loom_nb.charts import chart_tools
from loom_nb.frames import frame_tools
from loom_nb.sqlite import sqlite_store
from tests.export._threads import agent_for, frames_by_variable, run_thread, script
from tests.frames._orders import open_orders_over, orders_frame


def run_cells(notebook: Any, namespace: dict[str, Any]) -> dict[str, Any]:
    for cell in notebook.cells:
        if cell.cell_type == "code":
            exec(cell.source, namespace)
    return namespace


@pytest.mark.parametrize("seed", range(12))
def test_an_exported_thread_recomputes_every_frame_of_the_thread(tmp_path: Path, seed: int) -> None:
    orders = orders_frame()
    agent = agent_for(script(seed), orders, sqlite_store(tmp_path / "loom.db"))
    thread = agent.thread(run_thread(agent).thread_id)  # as the store gives it back
    expected = frames_by_variable(thread)
    assert expected, "the script made no read that worked"

    path = agent.export(thread.id, tmp_path / "thread.ipynb")
    namespace = run_cells(nbformat.read(path, as_version=4), {"orders": orders_frame()})
    for name, frame in expected.items():
        assert_frame_equal(namespace[name], frame, obj=name)


@pytest.mark.parametrize("seed", range(4))
def test_a_stored_thread_exports_its_code_without_decoding_a_frame(
    tmp_path: Path, seed: int
) -> None:
    # A call's code and its header's counts are written from the stored frame's columns and
    # counts alone: the cells are those written with every frame decoded, and none was.
    agent = agent_for(script(seed, calls=20), orders_frame(), sqlite_store(tmp_path / "l.db"))
    thread_id = run_thread(agent).thread_id
    stored = agent.thread(thread_id)
    undecoded = [r for r in stored.tool_results() if "_raw" in r.__dict__]
    assert len(undecoded) > 5
    cells = thread_cells(stored, agent.tools, mark_numbers=False).cells
    assert all("_raw" in r.__dict__ for r in undecoded)
    # nor were the stored rows parsed: the outline is kept beside the message
    assert all(r.__dict__["_raw"][0]._items is None for r in undecoded)
    decoded = agent.thread(thread_id)
    assert any(r.data is not None for r in decoded.tool_results())  # each one decoded
    assert thread_cells(decoded, agent.tools, mark_numbers=False).cells == cells


def test_a_thread_saved_without_frame_outlines_exports_the_same_cells(tmp_path: Path) -> None:
    # Rows an earlier loom_nb wrote keep no outline beside the message: the export reads the
    # counts from the stored frames instead, and writes the same notebook.
    path = tmp_path / "l.db"
    agent = agent_for(script(2, calls=20), orders_frame(), sqlite_store(path))
    thread_id = run_thread(agent).thread_id
    cells = thread_cells(agent.thread(thread_id), agent.tools, mark_numbers=False).cells
    agent.store.close()
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT thread_id, seq, json FROM loom_messages").fetchall()
        stripped = 0
        for thread, seq, text in rows:
            message = json.loads(text)
            for part in message["parts"]:
                stripped += part.pop("outline", None) is not None
            conn.execute(
                "UPDATE loom_messages SET json = ? WHERE thread_id = ? AND seq = ?",
                (json.dumps(message), thread, seq),
            )
    assert stripped > 5
    again = agent_for(script(2, calls=20), orders_frame(), sqlite_store(path))
    assert thread_cells(again.thread(thread_id), again.tools, mark_numbers=False).cells == cells


def test_the_notebook_reads_like_the_conversation(tmp_path: Path) -> None:
    orders = orders_frame()
    select = open_orders_over(5)
    update = {
        "table": "orders",
        "values": {"status": "x"},
        "filters": [{"column": "id", "op": "eq", "value": 1}],
    }
    replies: list[Reply | str] = [
        Reply("Let me look.", [("frames_list_tables", {}), ("frames_select", select)]),
        Reply("Flagging it.", [("frames_update", update)]),
        "Done: **2** open orders.",
    ]
    agent = agent_for(replies, orders)
    result = agent.run_sync("Which orders are open?")
    result = agent.resume_sync(result.thread_id, {result.pending[0].call_id: True})
    nb = nbformat.read(agent.export(result.thread_id, tmp_path / "t.ipynb"), as_version=4)
    kinds = [c.cell_type for c in nb.cells]
    sources = [c.source for c in nb.cells]
    assert kinds == [
        "markdown",
        "code",
        "markdown",
        "markdown",
        "markdown",
        "code",
        "markdown",
        "code",
        "markdown",
    ]
    assert sources[0].startswith("# Which orders are open?")
    assert "- `orders`: the DataFrame the agent read as table 'orders'" in sources[0]
    assert "import pandas as pd" in sources[1] and '["orders"]' in sources[1]
    assert sources[2] == "**You:**\n\nWhich orders are open?"
    assert sources[3] == "**analyst:**\n\nLet me look."
    assert sources[4] == "*Call 1* · `frames_list_tables()` (its tool writes no code)"
    assert sources[5].splitlines()[0] == (
        "# Call 2 · frames_select · orders · status = 'open' AND total > 5 · order by total desc"
        " · 1 row"  # what came back, as the call header says it
    )
    assert sources[5].endswith("\nresult_2")
    write = sources[7].splitlines()
    assert write[0] == "# Call 3 · frames_update · orders · set status = 'x' · id = 1"
    assert write[1] == "# A write, approved by the user, and done. Uncomment it to write again."
    assert write[2] == '# orders.loc[(orders["id"] == 1), "status"] = "x"'
    # the select found one open order: the answer's 2 is in no result, and the export says so
    assert sources[8] == (
        "**analyst:**\n\nDone: **2** open orders.\n\n"
        "> ⚠ *loom_nb: in no result:* `2` (no tool result shows or gives it)"
    )
    assert nb.metadata["loom_nb"]["thread_id"] == result.thread_id

    # Running it changes nothing: the write is a comment.
    fresh = orders_frame()
    namespace = run_cells(nb, {"orders": fresh})
    assert_frame_equal(fresh, orders_frame())
    assert "result_2" in namespace


def test_call_headers_count_what_came_back(tmp_path: Path) -> None:
    """``3 rows (limit 50)``, ``53 groups``, and ``50 of 53 groups`` with the setting that
    raises it, in the export's call comments as in the call headers."""
    weeks = pd.DataFrame(
        {"day": pd.date_range("2024-01-01", periods=371, freq="D"), "total": range(371)}
    )
    weekly = {"table": "weeks", "group_by": [{"column": "day", "bucket": "week"}]}
    calls = [
        ("frames_select", {"table": "weeks", "limit": 3}),
        ("frames_aggregate", weekly),
        (
            "frames_select",
            {
                "table": "weeks",
                "filters": [{"column": "total", "op": "lt", "value": 3}],
                "limit": 50,
            },
        ),
    ]
    tools = frame_tools({"weeks": weeks}, max_rows=5, frame_rows=50)
    agent = define_agent(
        name="a",
        model=ReplayModel([*(Reply("", [c]) for c in calls), "done"]),
        connectors=[tools],
    )
    nb = nbformat.read(agent.export(run_thread(agent).thread_id, tmp_path / "t.ipynb"), 4)
    heads = [c.source.splitlines()[0] for c in nb.cells if c.source.startswith("# Call")]
    assert heads == [
        "# Call 1 · frames_select · weeks · 3 of 371 rows (limit 3)",
        "# Call 2 · frames_aggregate · weeks · count by week of day · 50 of 53 groups "
        "(frame_rows=50 cut it)",
        "# Call 3 · frames_select · weeks · total < 3 · 3 rows (limit 50)",
    ]


def test_rejected_and_failed_calls_are_comments_that_say_so(tmp_path: Path) -> None:
    update = {
        "table": "orders",
        "values": {"status": "x"},
        "filters": [{"column": "id", "op": "eq", "value": 1}],
    }
    bad = {"table": "orders", "filters": [{"column": "total", "op": "like", "value": "1%"}]}
    agent = agent_for(
        [Reply("", [("frames_update", update), ("frames_select", bad)]), "ok"], orders_frame()
    )
    result = run_thread(agent)
    nb = nbformat.read(agent.export(result.thread_id, tmp_path / "t.ipynb"), as_version=4)
    code = [c.source for c in nb.cells if c.cell_type == "code"][1:]
    assert code[0].splitlines()[1] == "# A write, rejected by the user: nothing was run or written."
    failed = code[1].splitlines()[1]
    assert failed.startswith("# It failed: ") and "like works on text columns" in failed
    assert all(line.startswith("#") for c in code for line in c.splitlines())
    setup = nb.cells[1].source
    assert "orders" not in setup  # only code that runs says what it needs


def test_a_custom_tool_exports_its_own_code_and_others_say_they_have_none(tmp_path: Path) -> None:
    def code(arguments: dict[str, Any], ctx: Any) -> str:
        ctx.expect("prices", "a dict of prices")
        return f"{ctx.result} = prices[{arguments['item']!r}] * {arguments['n']}"

    def price_of(item: str, n: int) -> int:
        """The price of n items."""
        return {"apple": 2}[item] * n

    price = tool(
        price_of,
        name="price",
        describe=lambda a: f"{a['n']} × {a['item']}",
        code=code,
    )
    ping = tool(lambda: "pong", name="ping")
    model = ReplayModel([Reply("", [("price", {"item": "apple", "n": 3}), ("ping", {})]), "6"])
    agent = define_agent(name="a", model=model, tools=[price, ping])
    result = agent.run_sync("How much?")
    nb = nbformat.read(agent.export(result.thread_id, tmp_path / "t.ipynb"), as_version=4)
    sources = [c.source for c in nb.cells]
    assert "# Call 1 · price · 3 × apple\nresult_1 = prices['apple'] * 3\nresult_1" in sources
    assert "*Call 2* · `ping()` (its tool writes no code)" in sources
    assert run_cells(nb, {"prices": {"apple": 2}})["result_1"] == 6


@pytest.mark.parametrize("suffix", [".py", ".md"])
def test_a_script_or_markdown_export_holds_the_same_cells(tmp_path: Path, suffix: str) -> None:
    orders = orders_frame()
    agent = agent_for(script(3), orders)
    thread_id = run_thread(agent).thread_id
    ipynb = nbformat.read(agent.export(thread_id, tmp_path / "t.ipynb"), as_version=4)
    text = agent.export(thread_id, tmp_path / f"t{suffix}")
    if suffix == ".py":
        assert text.read_text().count("# %%") == len(ipynb.cells)
    back = jupytext.read(text)
    assert [(c.cell_type, c.source) for c in back.cells] == [
        (c.cell_type, c.source) for c in ipynb.cells
    ]


def test_a_missing_variable_stops_the_notebook_at_once_with_its_name(tmp_path: Path) -> None:
    agent = agent_for(script(1), orders_frame())
    path = agent.export(run_thread(agent).thread_id, tmp_path / "t.ipynb")
    with pytest.raises(NameError, match=r"define \['orders'\] before running this notebook"):
        run_cells(nbformat.read(path, as_version=4), {})


def test_an_unknown_format_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    agent = agent_for(script(1), orders_frame())
    thread_id = run_thread(agent).thread_id
    with pytest.raises(UserError, match=r"name a \.ipynb notebook, a \.py script"):
        agent.export(thread_id, tmp_path / "t.html")
    assert not (tmp_path / "t.html").exists()


@pytest.mark.slow
def test_export_works_in_a_plain_script_without_ipython(tmp_path: Path) -> None:
    program = f"""
import sys
import pandas as pd
from loom_nb import ReplayModel, Reply, define_agent
from loom_nb.frames import frame_tools
orders = pd.DataFrame({{"id": [1, 2], "total": [5.0, 50.0]}})
select = {{"table": "orders", "filters": [{{"column": "total", "op": "gt", "value": 10}}]}}
model = ReplayModel([Reply("", [("frames_select", select)]), "one"])
agent = define_agent(name="a", model=model, connectors=[frame_tools({{"orders": orders}})])
thread_id = agent.run_sync("big ones?").thread_id
print(agent.export(thread_id, {str(tmp_path / "t.py")!r}))
assert "IPython" not in sys.modules and "ipywidgets" not in sys.modules
"""
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    exported = (tmp_path / "t.py").read_text()
    assert 'result_1 = orders[(orders["total"] > 10)].head(10000)' in exported  # frame_rows


def test_a_100_call_thread_is_validated_once_by_its_shapes_and_exports_every_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What kept a long export slow was nbformat checking each cell as it was made; the time
    # itself is measured in bench/bench_export.py, not here.
    agent = agent_for(script(7, calls=100), orders_frame())
    thread_id = run_thread(agent).thread_id
    checked: list[int] = []  # the cells of each notebook nbformat validates
    validate = nbformat.validate

    def counted(nb: Any, *args: Any, **kwargs: Any) -> Any:
        checked.append(len(nb.get("cells", [])))
        return validate(nb, *args, **kwargs)

    monkeypatch.setattr(nbformat, "validate", counted)
    path = agent.export(thread_id, tmp_path / "t.ipynb")
    # once, and one cell of each shape (markdown, code): the others differ only in their text
    assert [n for n in checked if n] == [2]
    monkeypatch.undo()
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)  # the file as a whole
    assert len(nb.cells) > 100
    sources = "\n".join(c.source for c in nb.cells)
    results = set(re.findall(r"^result_\d+ = ", sources, re.M))
    assert len(results) >= len(agent.thread(thread_id).frames) > 50  # each frame has its code


def test_a_cell_unlike_the_others_is_among_those_validated() -> None:
    # The cells validated stand for all: a cell of another shape (an id nbformat refuses, a
    # key its schema has not) is validated itself, and the notebook is refused.
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(f"x = {i}") for i in range(50)]
    bad_id, extra_key = nbformat.v4.new_code_cell("y"), nbformat.v4.new_markdown_cell("z")
    bad_id.id, extra_key.stray = "not an id!", 1
    for odd in (bad_id, extra_key):
        with_odd = nbformat.from_dict({**nb, "cells": [*nb.cells[:20], odd, *nb.cells[20:]]})
        with pytest.raises(nbformat.ValidationError):
            nbformat.validate(_one_of_each_shape(with_odd))
    assert len(_one_of_each_shape(nb).cells) == 1
    nbformat.validate(_one_of_each_shape(nb))


def test_an_ipynb_export_is_the_text_nbformat_writes_for_it(tmp_path: Path) -> None:
    # loom_nb writes the JSON itself (nbformat's writer copies the whole notebook first); the
    # file must still be byte for byte what nbformat writes, so saving it in Jupyter changes
    # nothing but what the user changed.
    agent = agent_for(script(3, calls=12), orders_frame())
    path = agent.export(run_thread(agent).thread_id, tmp_path / "t.ipynb")
    text = path.read_text(encoding="utf-8")
    assert text == nbformat.writes(nbformat.reads(text, as_version=4)) + "\n"


def test_the_ipynb_writer_writes_any_cell_text_as_nbformat_does() -> None:
    # The cells' lines are written apart from the rest of the JSON: every kind of line end,
    # an empty cell, quotes, backslashes, controls and characters past the BMP as nbformat.
    texts = ["", "a\n", "\n\n", "x\u2028y\u2029z", '"\\', "😀 \x00\x1f\x7f", "end\n"]
    texts += ["\r\nq\rw\x0bx\x0c\x1c\x1d\x1e\x85.", "   lead\ttab", '"source": "x"']
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(t) if i % 2 else nbformat.v4.new_markdown_cell(t)
        for i, t in enumerate(texts)
    ]
    nb.cells[1].metadata["jupyter"] = {"source_hidden": True}
    nb.cells[3].metadata.update(tags=["a", "b"], deep={"x": [1, 2.5, None, True]})
    nb.cells[3].execution_count = 7
    nb.metadata["loom_nb"] = {"source": "a value, not a cell's"}
    assert _ipynb_text(nb) == nbformat.writes(nb)


def test_values_with_newlines_and_quotes_stay_inside_their_comment_and_literal(
    tmp_path: Path,
) -> None:
    odd = "o'p\"en\nclosed\\"
    select = {"table": "orders", "filters": [{"column": "status", "op": "neq", "value": odd}]}
    agent = agent_for([Reply("", [("frames_select", select)]), "ok"], orders_frame())
    thread = agent.thread(run_thread(agent).thread_id)
    nb = nbformat.read(agent.export(thread.id, tmp_path / "t.ipynb"), as_version=4)
    assert "\\nclosed" in nb.cells[-2].source.splitlines()[0]  # the words, on one line
    namespace = run_cells(nb, {"orders": orders_frame()})
    assert_frame_equal(namespace["result_1"], thread.frames[0])


@pytest.mark.parametrize(
    ("state", "said"),
    [
        ("pending", "# A write, waiting for approval when this was exported."),
        ("running", "# A write, running when this was exported."),
        ("unknown", "# A write, of unknown outcome when this was exported (the kernel stopped"),
    ],
)
def test_a_write_without_a_result_says_where_its_call_was(state: CallState, said: str) -> None:
    update = {
        "table": "orders",
        "values": {"status": "x"},
        "filters": [{"column": "id", "op": "eq", "value": 1}],
    }
    thread = Thread(
        "t1",
        "analyst",
        messages=[
            Message("user", [TextPart("Close order 1.")]),
            Message("assistant", [ToolCall("c1", "frames_update", update)]),
        ],
        pending=[PendingApproval("c1", "frames_update", update, state=state)],
    )
    tools = frame_tools({"orders": {"frame": orders_frame(), "write": True}}).tools
    [cell] = [c for c in thread_cells(thread, tools).cells if c.source.startswith("# Call 1")]
    assert cell.source.splitlines()[1].startswith(said)
    assert all(line.startswith("#") for line in cell.source.splitlines())  # never run


def test_tables_named_like_the_exports_own_variables_and_helpers_keep_their_frames(
    tmp_path: Path,
) -> None:
    """Tables (or the notebook's DataFrames) called ``groups``, ``mask``, ``missing``,
    ``bucket_start`` or ``draw_chart``: the export's scratch variables and helpers take other
    names, so every call still reads the user's frame."""
    orders = orders_frame()
    named = {
        name: pd.DataFrame({"x": [1, 2, 3], "y": [3.0, 1.0, 2.0]})
        for name in ("groups", "mask", "matched", "missing", "bucket_start", "draw_chart")
    }
    long_filter = [
        {"column": "status", "op": "neq", "value": "a rather long value to compare with"},
        {"column": "total", "op": "gt", "value": 1},
    ]
    weekly = {
        "table": "orders",
        "filters": long_filter,
        "group_by": [{"column": "created_at", "bucket": "week"}],
    }
    calls = [
        ToolCall("c1", "frames_aggregate", weekly),
        ToolCall(
            "c2", "chart", {"result": "c1", "kind": "bar", "x": "week_created_at", "y": "count"}
        ),
        *(ToolCall(f"r_{n}", "frames_select", {"table": n}) for n in named),
        ToolCall("c3", "frames_select", {"table": "orders", "filters": long_filter}),
        ToolCall("c4", "frames_aggregate", {"table": "groups", "group_by": ["x"]}),
    ]
    model = ReplayModel([Reply("Looking.", calls[:2]), Reply("More.", calls[2:]), "Done."])
    tools = frame_tools({"orders": orders, **named})
    agent = define_agent(name="a", model=model, connectors=[tools, chart_tools()])
    thread = agent.thread(agent.run_sync("Weekly, and the others.").thread_id)
    expected = frames_by_variable(thread)
    assert len(expected) == len(calls) - 1  # every read worked

    path = agent.export(thread.id, tmp_path / "thread.ipynb")
    defined = {"orders": orders_frame(), **{n: f.copy() for n, f in named.items()}}
    namespace = run_cells(nbformat.read(path, as_version=4), dict(defined))
    for name, frame in expected.items():
        assert_frame_equal(namespace[name], frame, obj=name)
    for name, frame in named.items():
        assert_frame_equal(namespace[name], frame, obj=name)  # still the user's frame


def _uncommented(notebook: Any) -> Any:
    """The notebook with its approved writes uncommented ("Uncomment it to write again")."""
    for cell in notebook.cells:
        lines = cell.source.splitlines()
        if len(lines) > 1 and lines[1].endswith("and done. Uncomment it to write again."):
            cell.source = "\n".join([lines[0], *(line[2:] for line in lines[2:])])
    return notebook


def test_approved_writes_uncommented_redo_the_writes_so_every_later_read_is_the_threads(
    tmp_path: Path,
) -> None:
    """Run on the frame as it was before the thread, with its approved writes uncommented,
    the export gives every frame of the thread, the reads after each write included: the
    append's rows take the next index labels, its values converted as the tool did (a
    number sent as text, a time without an offset in a tz-aware column)."""

    def before() -> pd.DataFrame:
        df = orders_frame()
        df.index = pd.Index([10, 20, 30, 40, 50, 60, 70, 80])
        return df

    orders = before()
    update = {
        "table": "orders",
        "values": {"status": "closed", "total": "99.5", "qty": None},
        "filters": [{"column": "id", "op": "lte", "value": 2}],
    }
    rows = [
        {"id": "9", "total": "10", "status": "open", "paid": False, "qty": "3"},
        {"id": 10, "paid": "true", "segment": "retail", "created_at": "2024-01-20T10:00"},
    ]
    select = {"table": "orders", "order": [{"column": "total", "desc": True}], "limit": 20}
    replies = [
        Reply("", [("frames_select", select)]),
        Reply("", [("frames_update", update)]),
        Reply("", [("frames_select", select)]),
        Reply("", [("frames_append", {"table": "orders", "rows": rows})]),
        Reply("", [("frames_select", select), ("frames_aggregate", {"table": "orders"})]),
        "Done.",
    ]
    tools = frame_tools({"orders": {"frame": orders, "write": True}}, max_rows=20)
    agent = define_agent(name="a", model=ReplayModel(replies), connectors=[tools])
    result = agent.run_sync("Fix the first two, add two.")
    while result.status == "awaiting_approval":
        result = agent.resume_sync(result.thread_id, {p.call_id: True for p in result.pending})
    thread = agent.thread(result.thread_id)
    assert len(orders) == 10 and list(orders.index[-2:]) == [81, 82]
    expected = frames_by_variable(thread)

    path = agent.export(thread.id, tmp_path / "thread.ipynb")
    notebook = _uncommented(nbformat.read(path, as_version=4))
    namespace = run_cells(notebook, {"orders": before()})
    for name, frame in expected.items():
        assert_frame_equal(namespace[name], frame, obj=name)
    assert_frame_equal(namespace["orders"], orders)


def test_a_select_of_every_column_exports_the_columns_it_returned(tmp_path: Path) -> None:
    """The user adds a column after the agent read the frame, then runs the export on the
    frame as it is now: the select's code still gives the columns the thread holds."""
    orders = orders_frame()
    select = {"table": "orders", "filters": [{"column": "total", "op": "gt", "value": 50}]}
    agent = agent_for([Reply("", [("frames_select", select)]), "Done."], orders)
    thread = agent.thread(run_thread(agent).thread_id)
    orders["margin"] = orders["total"] * 0.2  # the user's next cell
    path = agent.export(thread.id, tmp_path / "thread.ipynb")
    namespace = run_cells(nbformat.read(path, as_version=4), {"orders": orders.copy()})
    assert_frame_equal(namespace["result_1"], frames_by_variable(thread)["result_1"])


def test_a_table_python_cannot_name_is_read_from_a_variable_with_an_underscore(
    tmp_path: Path,
) -> None:
    """A table called ``class`` (a keyword) or ``len`` or ``pd`` (names the code itself
    uses): the export expects ``class_``, ``len_`` and ``pd_``, and says so."""
    frames = {n: pd.DataFrame({"x": [1, 2, 3]}) for n in ("class", "len", "pd", "orders")}
    calls = [ToolCall(f"c_{n}", "frames_aggregate", {"table": n}) for n in frames]
    calls += [ToolCall("c_rows", "frames_select", {"table": "class"})]
    agent = define_agent(
        name="a",
        model=ReplayModel([Reply("Counting.", calls), "Done."]),
        connectors=[frame_tools(frames)],
    )
    thread = agent.thread(agent.run_sync("How many in each?").thread_id)
    path = agent.export(thread.id, tmp_path / "thread.ipynb")
    notebook = nbformat.read(path, as_version=4)
    assert "- `class_`: the DataFrame the agent read as table 'class'" in notebook.cells[0].source
    defined = {"class_": frames["class"], "len_": frames["len"], "pd_": frames["pd"]}
    namespace = run_cells(notebook, {**defined, "orders": frames["orders"]})
    for name, frame in frames_by_variable(thread).items():
        assert_frame_equal(namespace[name], frame, obj=name)


def test_an_approved_write_uncommented_finds_the_imports_it_needs(tmp_path: Path) -> None:
    """A thread whose one call is an approved update with a like filter: the first cell
    still imports what its code uses, so uncommenting it is enough to write again."""
    update = {
        "table": "orders",
        "values": {"status": "checked"},
        "filters": [{"column": "status", "op": "ilike", "value": "o_en"}],
    }
    orders = orders_frame()
    tools = frame_tools({"orders": {"frame": orders, "write": True}}, approve_writes=False)
    model = ReplayModel([Reply("", [("frames_update", update)]), "Done."])
    agent = define_agent(name="a", model=model, connectors=[tools])
    thread_id = agent.run_sync("Check the open ones.").thread_id
    notebook = _uncommented(nbformat.read(agent.export(thread_id, tmp_path / "t.ipynb"), 4))
    namespace = run_cells(notebook, {"orders": orders_frame()})
    assert_frame_equal(namespace["orders"], orders)
