"""The testing models shipped with the library."""

from __future__ import annotations

import asyncio

import pytest

from loom_nb import (
    FunctionModel,
    ModelError,
    ReplayModel,
    Reply,
    TextDelta,
    ToolCall,
    Usage,
    define_agent,
)
from loom_nb.models import ModelRequest


async def collect(model, request=None):
    return [e async for e in model.stream(request or ModelRequest("i", []))]


async def test_replay_streams_words_and_records_requests():
    model = ReplayModel(["one two", Reply("", [("t", {"x": 1})], usage=Usage(5, 2, 1))])
    first = await collect(model)
    assert [e.text for e in first if isinstance(e, TextDelta)] == ["one ", "two"]
    second = await collect(model)
    call = second[0]
    assert isinstance(call, ToolCall) and (call.name, call.arguments) == ("t", {"x": 1})
    assert second[-1] == Usage(5, 2, 1)
    assert len(model.requests) == 2


async def test_replay_says_when_it_runs_out():
    model = ReplayModel([])
    with pytest.raises(ModelError, match="no reply left for request 1"):
        await collect(model)


async def test_replay_can_send_broken_json_arguments():
    [call, _] = await collect(ReplayModel([Reply("", [("t", "{oops")])]))
    assert call.arguments is None and call.raw_arguments == "{oops"


@pytest.mark.parametrize("kind", ["sync", "async", "stream"])
def test_function_model_forms(kind):
    def sync_fn(request: ModelRequest) -> str:
        return f"you said {request.messages[-1].text}"

    async def async_fn(request: ModelRequest) -> str:
        await asyncio.sleep(0)
        return sync_fn(request)

    async def stream_fn(request: ModelRequest):
        yield TextDelta("you said ")
        yield TextDelta(request.messages[-1].text)

    fn = {"sync": sync_fn, "async": async_fn, "stream": stream_fn}[kind]
    agent = define_agent(name="echo", model=FunctionModel(fn))
    assert agent.run_sync("hello").output == "you said hello"
