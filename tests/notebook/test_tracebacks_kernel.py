"""The user's own code failing inside a run keeps its traceback, in a real kernel (ipykernel):
a tool (the thread shows the error, and where the tool raised it, folded), a preview (the card
shows where it raised), a connector's client factory (the call's error, where the factory
raised) and a model function (the cell's error, after its one line). The shell's
``%xmode`` applies: ``Verbose`` shows each frame's values, ``Minimal`` only the line."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.notebook.nb_kernels import Kernel, build, printed

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SETUP = textwrap.dedent(
    """
    %load_ext loom_nb
    from loom_nb import FunctionModel, Reply, define_agent, tool

    def check(x):
        secret_local = 41
        raise ValueError(f"bad x: {x}")

    @tool
    def boom(x: int) -> int:
        "Fails."
        return check(x)

    def bad_preview(arguments):
        looked_up = {}
        return looked_up["rows"]

    @tool(needs_approval=True, preview=bad_preview)
    def write(x: int) -> int:
        "Writes."
        return x

    def script(request):
        last = request.messages[-1]
        if last.role == "user":
            return Reply("Trying.", [("boom", {"x": 1})])
        return Reply("Now writing.", [("write", {"x": 2})])

    def broken(request):
        items = []
        return items[0]

    a = define_agent(name="a", model=FunctionModel(script), tools=[boom, write])
    b = define_agent(name="b", model=FunctionModel(broken))

    from loom_nb.supabase import supabase_tools

    def make_client(ctx):
        token = ctx["jwt"]  # not in this run's context
        return token

    def fetch(request):
        if request.messages[-1].role == "user":
            return Reply("Fetching.", [("supabase_select", {"table": "orders"})])
        return "The client could not be made."

    c = define_agent(name="c", model=FunctionModel(fetch), connectors=[
        supabase_tools(client=make_client, tables={"orders": {"columns": ["id", "total"]}})])
    """
)


@pytest.fixture
def kernel(tmp_path: Path) -> Any:
    k = Kernel(build("7.4"), tmp_path)
    try:
        reply, _ = k.run(SETUP)
        assert reply["status"] == "ok", reply
        yield k
    finally:
        k.close()


def shown(messages: list[dict[str, Any]]) -> str:
    """Everything the frontend was sent: streams, widget values, error tracebacks."""
    return json.dumps([m["content"] for m in messages])


def error_lines(messages: list[dict[str, Any]]) -> str:
    """The cell's error as the frontend shows it, without its colours."""
    import re

    lines = [
        line for m in messages if m["msg_type"] == "error" for line in m["content"]["traceback"]
    ]
    return re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(lines))


def test_tool_preview_and_model_errors_keep_their_traceback(kernel: Kernel) -> None:
    # widgets: the tool's error, with its traceback folded; the card, with the preview's
    reply, messages = kernel.run("%%loom a\ngo")
    assert reply["status"] == "ok"
    said = shown(messages)
    assert "loom-traceback" in said and "<summary>traceback</summary>" in said
    assert 'raise ValueError(f\\"bad x: {x}\\")' in said.replace("&quot;", '\\"')
    assert "return check(x)" in said  # the tool's own frame, then the helper's
    assert 'return looked_up[\\"rows\\"]' in said.replace("&quot;", '\\"')
    assert "_turn.py" not in said and "asyncio" not in said  # only the user's frames

    # the Supabase client factory: the call's error says so, and where the factory raised
    reply, messages = kernel.run("%%loom c\nhi")
    said = shown(messages)
    assert reply["status"] == "ok" and "the Supabase client factory failed: KeyError" in said
    assert 'token = ctx[\\"jwt\\"]' in said.replace("&quot;", '\\"'), said
    assert "in make_client(ctx)" in said and "_connector.py" not in said

    # text (terminal IPython): the same, indented under the failed call
    kernel.run("%config LoomMagics.display = 'text'")
    _, messages = kernel.run("%%loom a --new\ngo")
    text = printed(messages)
    assert "⚠ boom failed: ValueError: bad x: 1" in text
    assert "return check(x)" in text and "in boom(x)" in text
    assert 'return looked_up["rows"]' in text and "KeyError: 'rows'" in text

    # the model function: the cell fails with its one line, then where the function raised
    reply, messages = kernel.run("%%loom b\nhi")
    assert reply["status"] == "error"
    tb = error_lines(messages)
    assert tb.splitlines()[0].startswith("RunFailed: b: test:function failed: IndexError")
    assert "return items[0]" in tb and "in broken(request)" in tb

    # %xmode Verbose: each frame with its values
    kernel.run("%xmode Verbose")
    _, messages = kernel.run("%%loom a --new\ngo")
    text = printed(messages)
    assert "in boom(x=1)" in text and "in check(x=1)" in text
    assert "in bad_preview(arguments={'x': 2})" in text
    _, messages = kernel.run("%%loom c --new\nhi")
    assert "in make_client(ctx=RunContext(" in printed(messages)
    _, messages = kernel.run("%%loom b\nhi")
    assert "in broken(request=ModelRequest(" in error_lines(messages)

    # %xmode Minimal: the one line only
    kernel.run("%xmode Minimal")
    _, messages = kernel.run("%%loom b\nhi")
    assert "return items[0]" not in error_lines(messages)
