"""What only the Anthropic adapter does: the Messages API request and its turns. What every
adapter does is in ``test_contract.py``."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from loom_nb import (
    Message,
    TextDelta,
    TextPart,
    ToolCall,
    ToolResult,
    Usage,
)
from loom_nb.models import ModelSettings, resolve_model
from loom_nb.models.anthropic import AnthropicModel
from tests.models._adapters import WEATHER, collect, live_weather, request, weather_agent
from tests.models._anthropic_wire import finish, message_start, stream, text, text_block, tool_block
from tests.models._wire import OPENED, Reply, WireServer

# ---- helpers -----------------------------------------------------------------------------------


def make_model(server: WireServer, **options: Any) -> AnthropicModel:
    options.setdefault("api_key", "sk-ant-test")
    options.setdefault("retry_delay", 0.0)
    model = AnthropicModel("claude-test", base_url=server.url, **options)
    OPENED.append(model)
    return model


# ---- the request -------------------------------------------------------------------------------


async def test_the_request_is_a_streamed_messages_call(server: WireServer) -> None:
    server.add(
        Reply(
            events=[
                message_start(30, cache_read=100),
                *text_block(0, "Hel", "lo"),
                *finish("end_turn", 4),
            ]
        )
    )
    events = await collect(make_model(server), request("Say hello", tools=[WEATHER]))

    # Cached input tokens count as input.
    assert events == [TextDelta("Hel"), TextDelta("lo"), Usage(130, 4, 1)]
    [sent] = server.requests
    assert "anthropic-version" in sent.headers
    assert sent.body["max_tokens"] == 4096
    assert sent.body["system"] == "Be brief."
    assert sent.body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Say hello"}]}
    ]
    assert sent.body["tools"] == [
        {
            "name": "get_weather",
            "description": "The weather in a city.",
            "input_schema": WEATHER.parameters,
        }
    ]


async def test_max_tokens_is_required_so_the_model_has_a_default(server: WireServer) -> None:
    server.add(text("ok"), text("ok"))
    model = make_model(server, max_tokens=1000)
    await collect(model, request())
    await collect(model, request(settings=ModelSettings(max_tokens=222)))

    first, second = server.bodies()
    assert first["max_tokens"] == 1000 and "temperature" not in first
    assert second["max_tokens"] == 222


# ---- the history as Messages API turns ----------------------------------------------------------


async def test_history_maps_to_alternating_turns(server: WireServer) -> None:
    """Tool results merge into one user turn, before any text; empty turns are left out."""
    history = [
        Message.user("Oslo and Rome?"),
        Message(
            "assistant",
            [
                TextPart("Checking."),
                ToolCall("toolu_a", "get_weather", {"city": "Oslo"}),
                ToolCall("toolu_b", "get_weather", None, raw_arguments="{bad"),
            ],
        ),
        Message(
            "tool",
            [
                ToolResult("toolu_a", "get_weather", "Sunny in Oslo"),
                ToolResult("toolu_b", "get_weather", '{"error": "not JSON"}', is_error=True),
            ],
        ),
        Message("assistant", []),
        Message.user("And tomorrow?"),
    ]
    server.add(text("ok"))
    await collect(make_model(server), request(messages=history, instructions=None))

    body = server.requests[0].body
    assert "system" not in body
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Oslo and Rome?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {
                    "type": "tool_use",
                    "id": "toolu_a",
                    "name": "get_weather",
                    "input": {"city": "Oslo"},
                },
                {"type": "tool_use", "id": "toolu_b", "name": "get_weather", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "Sunny in Oslo"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_b",
                    "content": '{"error": "not JSON"}',
                    "is_error": True,
                },
                {"type": "text", "text": "And tomorrow?"},
            ],
        },
    ]


async def test_an_agents_tool_result_goes_back_in_a_user_turn(server: WireServer) -> None:
    server.add(
        stream(tool_block(0, "toolu_w", "get_weather", '{"city": ', '"Oslo"}'), stop="tool_use"),
        text("Sunny in Oslo."),
    )
    agent = weather_agent(make_model(server), instructions="You report weather.")
    await agent.run("Weather in Oslo?")

    first, second = server.bodies()
    assert first["tools"][0]["input_schema"]["properties"]["city"]["type"] == "string"
    assert second["system"] == "You report weather."
    assert second["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Oslo?"}]},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_w",
                    "name": "get_weather",
                    "input": {"city": "Oslo"},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_w", "content": "Sunny in Oslo, 21 C"}
            ],
        },
    ]


async def test_past_calls_of_tools_no_longer_defined_are_declared_never_to_be_called(
    server: WireServer,
) -> None:
    """The API refuses tool blocks in a request without tools: the tools that only past calls
    name are declared, with ``tool_choice`` none; a request with tools is sent as it is."""
    history = [
        Message.user("Weather?"),
        Message("assistant", [ToolCall("toolu_a", "get_weather", {"city": "Oslo"})]),
        Message("tool", [ToolResult("toolu_a", "get_weather", "Sunny")]),
    ]
    server.add(text("ok"), text("ok"))
    await collect(make_model(server), request(messages=history))
    await collect(make_model(server), request(messages=history, tools=[WEATHER]))

    without, with_tools = server.bodies()
    assert without["tools"] == [{"name": "get_weather", "input_schema": {"type": "object"}}]
    assert without["tool_choice"] == {"type": "none"}
    assert [t["name"] for t in with_tools["tools"]] == ["get_weather"]
    assert "tool_choice" not in with_tools


async def test_a_past_call_of_a_name_the_api_refuses_declares_no_tool(server: WireServer) -> None:
    """Without tools, only the names the API takes are declared; a call of another name (a
    thread from another model) and its result go as text where the blocks would be."""
    history = [
        Message.user("Weather?"),
        Message(
            "assistant",
            [
                ToolCall("toolu_a", "get_weather", {"city": "Oslo"}),
                ToolCall("toolu_x", "weather.get", {"city": "Rome"}),
            ],
        ),
        Message(
            "tool",
            [
                ToolResult("toolu_a", "get_weather", "Sunny"),
                ToolResult("toolu_x", "weather.get", "no such tool", is_error=True),
            ],
        ),
    ]
    server.add(text("ok"))
    await collect(make_model(server), request(messages=history))

    [body] = server.bodies()
    assert body["tools"] == [{"name": "get_weather", "input_schema": {"type": "object"}}]
    assert body["tool_choice"] == {"type": "none"}
    use, call = body["messages"][1]["content"]
    assert use["type"] == "tool_use" and use["name"] == "get_weather"
    assert call["type"] == "text" and "this API refuses its tool name" in call["text"]
    assert (
        '{"call_id": "toolu_x", "tool": "weather.get", "arguments": {"city": "Rome"}}'
        in (call["text"])
    )
    result, answer = body["messages"][2]["content"]
    assert result == {"type": "tool_result", "tool_use_id": "toolu_a", "content": "Sunny"}
    assert answer["type"] == "text"
    assert (
        '{"call_id": "toolu_x", "tool": "weather.get", "is_error": true}\nno such tool'
        in (answer["text"])
    )


async def test_broken_input_goes_back_flagged_as_an_error(server: WireServer) -> None:
    server.add(
        stream(tool_block(0, "toolu_1", "get_weather", '{"city": Oslo'), stop="tool_use"),
        text("Let me try again."),
    )
    agent = weather_agent(make_model(server))
    await agent.run("Weather?")

    [block] = server.requests[1].body["messages"][-1]["content"]
    assert block["type"] == "tool_result" and block["is_error"] is True
    assert "not a JSON object" in json.loads(block["content"])["error"]


# ---- resolving ---------------------------------------------------------------------------------


def test_model_string_resolves() -> None:
    model = resolve_model("anthropic:claude-sonnet-4-5")
    assert isinstance(model, AnthropicModel) and model.name == "anthropic:claude-sonnet-4-5"
    assert model.base_url == "https://api.anthropic.com"
    assert model.is_anthropic


# ---- live --------------------------------------------------------------------------------------


@pytest.mark.live
async def test_live_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """LOOM_LIVE_ANTHROPIC_MODEL=claude-haiku-4-5 ANTHROPIC_API_KEY=... (ANTHROPIC_BASE_URL
    optional)."""
    name = os.environ.get("LOOM_LIVE_ANTHROPIC_MODEL")
    if not name or not os.environ.get("ANTHROPIC_API_KEY"):
        pytest.skip("set LOOM_LIVE_ANTHROPIC_MODEL and ANTHROPIC_API_KEY")
    model = AnthropicModel(name, max_tokens=300, max_retries=1)
    result = await live_weather(model, monkeypatch)
    assert result.usage.input_tokens > 0
