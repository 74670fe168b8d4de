"""Tool calls whose arguments are too deep or too large: each gets an error result that says
why, the run goes on, and the thread saves and reloads (every store walks the arguments)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from loom_nb import ReplayModel, Reply, define_agent, tool
from loom_nb._arguments import MAX_CHARS, MAX_DEPTH, MAX_ITEMS, size_problem
from loom_nb.models._tool_calls import tool_call
from loom_nb.sqlite import sqlite_store


@tool
def echo(value: Any) -> str:
    """Say what you got."""
    return "got it"


def nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("arguments", "why"),
    [
        ({"value": nested(975)}, f"nested more than {MAX_DEPTH} levels deep"),
        ({"value": nested(20_000)}, f"nested more than {MAX_DEPTH} levels deep"),
        ({"value": {"a": {"b": nested(MAX_DEPTH)}}}, f"nested more than {MAX_DEPTH} levels deep"),
        ({"value": "x" * (MAX_CHARS + 1)}, f"more than {MAX_CHARS:,} characters of text"),
        ({"value": list(range(MAX_ITEMS + 1))}, f"more than {MAX_ITEMS:,} values"),
        ({"value": [{"k" * 1000: 1} for _ in range(1001)]}, "characters of text"),
    ],
    ids=["975-deep", "20000-deep", "deep-in-objects", "huge-string", "huge-list", "huge-keys"],
)
@pytest.mark.parametrize("store", ["memory", "sqlite"])
async def test_pathological_arguments_are_an_error_result_and_the_run_goes_on(
    tmp_path, arguments, why, store
):
    kwargs: dict[str, Any] = {}
    if store == "sqlite":
        kwargs["store"] = sqlite_store(tmp_path / "loom.db")
    model = ReplayModel([Reply(tool_calls=[("echo", arguments), ("echo", {"value": 1})]), "OK."])
    agent = define_agent(name="a", model=model, tools=[echo], **kwargs)
    result = await agent.run("go")

    assert result.status == "complete" and result.output == "OK."
    bad, good = result.new_messages[2].tool_results
    assert bad.is_error and why in json.loads(bad.content)["error"]
    assert "are too large to use" in json.loads(bad.content)["error"]
    assert not good.is_error and good.content == "got it"  # the other call of the turn ran
    assert model.requests[-1].messages[-1].tool_results[0].is_error  # the model was told
    saved = agent.thread(result.thread_id)  # what the store holds reloads
    assert [m.role for m in saved.messages] == ["user", "assistant", "tool", "assistant"]
    assert saved.messages[1].tool_calls[0].arguments is None


def test_arguments_at_the_limits_are_kept():
    assert size_problem({"value": nested(MAX_DEPTH - 1)}) is None
    assert size_problem({"value": "x" * (MAX_CHARS - 5)}) is None
    assert size_problem({"value": list(range(MAX_ITEMS - 1))}) is None


def test_json_text_nested_too_deep_for_the_parser_is_kept_as_raw_text():
    raw = '{"value": ' + "[" * 5000 + "]" * 5000 + "}"
    call = tool_call("c1", "echo", raw)
    assert call.arguments is None and call.raw_arguments == raw


async def test_a_tool_result_too_deep_to_save_keeps_its_content_and_drops_its_data(tmp_path):
    from loom_nb import ToolOutput

    @tool
    def deep() -> ToolOutput:
        """Answer with very nested data."""
        return ToolOutput("done", nested(5000))

    model = ReplayModel([Reply(tool_calls=[("deep", {})]), "OK."])
    agent = define_agent(name="a", model=model, tools=[deep], store=sqlite_store(tmp_path / "d"))
    result = await agent.run("go")
    assert result.status == "complete"
    (res,) = result.new_messages[2].tool_results
    assert res.content == "done" and res.data is None
