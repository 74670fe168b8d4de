"""The Anthropic adapter: the real anthropic SDK against a local Messages API server."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import pytest
from _wire import OPENED, Reply, WireServer, closed_port_url, event

from loom_nb import (
    AuthenticationFailed,
    ContextTooLong,
    Message,
    MissingAPIKey,
    MissingExtra,
    ModelNotFound,
    ProviderError,
    ProviderUnreachable,
    RateLimited,
    TextDelta,
    TextPart,
    ToolCall,
    ToolResult,
    Usage,
    define_agent,
    tool,
)
from loom_nb.models import ModelRequest, ModelSettings, ToolDefinition, resolve_model
from loom_nb.models.anthropic import AnthropicModel

# ---- the wire format -------------------------------------------------------------------------


def message_start(input_tokens: int = 25, cache_read: int = 0) -> str:
    usage: dict[str, Any] = {"input_tokens": input_tokens, "output_tokens": 1}
    if cache_read:
        usage["cache_read_input_tokens"] = cache_read
        usage["cache_creation_input_tokens"] = 0
    return event(
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "content": [],
                "model": "claude-test",
                "stop_reason": None,
                "stop_sequence": None,
                "usage": usage,
            },
        },
    )


def text_block(index: int, *pieces: str) -> list[str]:
    out = [
        event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        event("ping", {"type": "ping"}),
    ]
    out += [
        event(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "text_delta", "text": p},
            },
        )
        for p in pieces
    ]
    out.append(event("content_block_stop", {"type": "content_block_stop", "index": index}))
    return out


def tool_start(index: int, call_id: str, name: str) -> str:
    return event(
        "content_block_start",
        {
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}},
        },
    )


def tool_json(index: int, piece: str) -> str:
    return event(
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "input_json_delta", "partial_json": piece},
        },
    )


def block_stop(index: int) -> str:
    return event("content_block_stop", {"type": "content_block_stop", "index": index})


def tool_block(index: int, call_id: str, name: str, *pieces: str) -> list[str]:
    return [
        tool_start(index, call_id, name),
        *(tool_json(index, p) for p in pieces),
        block_stop(index),
    ]


def finish(stop: str = "end_turn", output_tokens: int = 10) -> list[str]:
    return [
        event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": output_tokens},
            },
        ),
        event("message_stop", {"type": "message_stop"}),
    ]


def stream(
    *blocks: list[str] | str,
    stop: str = "end_turn",
    usage: tuple[int, int] = (25, 10),
    **reply: Any,
) -> Reply:
    events = [message_start(usage[0])]
    for b in blocks:
        events.extend([b] if isinstance(b, str) else b)
    events += finish(stop, usage[1])
    return Reply(events=events, **reply)


def text(*pieces: str, usage: tuple[int, int] = (25, 10)) -> Reply:
    return stream(text_block(0, *pieces), usage=usage)


def error(status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> Reply:
    body = {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_1"}
    return Reply(status, body, headers={"request-id": "req_1", **(headers or {})})


# ---- helpers -----------------------------------------------------------------------------------


def make_model(server: WireServer, **options: Any) -> AnthropicModel:
    options.setdefault("api_key", "sk-ant-test")
    options.setdefault("retry_delay", 0.0)
    model = AnthropicModel("claude-test", base_url=server.url, **options)
    OPENED.append(model)
    return model


def opened(model: Any) -> Any:
    """Close this model's connections when the test ends."""
    OPENED.append(model)
    return model


def request(
    prompt: str = "Hi",
    *,
    instructions: str | None = "Be brief.",
    tools: list[ToolDefinition] | None = None,
    settings: ModelSettings | None = None,
    messages: list[Message] | None = None,
) -> ModelRequest:
    return ModelRequest(
        instructions, messages or [Message.user(prompt)], tools or [], settings or ModelSettings()
    )


def sent_key(headers: dict[str, str]) -> str | None:
    """The key as the SDK sent it: ``x-api-key``, or a bearer token (newer SDKs)."""
    if "x-api-key" in headers:
        return headers["x-api-key"]
    auth = headers.get("authorization", "")
    return auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None


async def collect(model: AnthropicModel, req: ModelRequest) -> list[Any]:
    return [e async for e in model.stream(req)]


WEATHER = ToolDefinition(
    "get_weather",
    "The weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}, 21 C"


# ---- streaming ---------------------------------------------------------------------------------


async def test_text_streams_with_system_and_usage(server: WireServer) -> None:
    server.add(
        Reply(
            events=[
                message_start(30, cache_read=100),
                *text_block(0, "Hel", "lo"),
                *finish("end_turn", 4),
            ]
        )
    )
    events = await collect(make_model(server), request("Say hello"))

    assert events == [TextDelta("Hel"), TextDelta("lo"), Usage(130, 4, 1)]
    [sent] = server.requests
    assert sent.method == "POST" and sent.path == "/v1/messages"
    assert sent_key(sent.headers) == "sk-ant-test"
    assert "anthropic-version" in sent.headers
    assert sent.body["model"] == "claude-test"
    assert sent.body["stream"] is True
    assert sent.body["max_tokens"] == 4096
    assert sent.body["system"] == "Be brief."
    assert sent.body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Say hello"}]}
    ]
    assert "tools" not in sent.body


async def test_tool_input_split_across_deltas(server: WireServer) -> None:
    server.add(
        stream(
            text_block(0, "Let me check."),
            tool_block(1, "toolu_01", "get_weather", '{"ci', 'ty": "Pa', 'ris"}'),
            stop="tool_use",
        )
    )
    events = await collect(make_model(server), request(tools=[WEATHER]))

    assert events == [
        TextDelta("Let me check."),
        ToolCall("toolu_01", "get_weather", {"city": "Paris"}),
        Usage(25, 10, 1),
    ]
    assert server.requests[0].body["tools"] == [
        {
            "name": "get_weather",
            "description": "The weather in a city.",
            "input_schema": WEATHER.parameters,
        }
    ]


async def test_several_tool_calls_in_one_turn(server: WireServer) -> None:
    server.add(
        stream(
            tool_block(0, "toolu_a", "get_weather", '{"city": "Oslo"}'),
            tool_block(1, "toolu_b", "get_weather", '{"city":', ' "Rome"}'),
            tool_block(2, "toolu_c", "get_time"),  # no input deltas: an empty object
            stop="tool_use",
        )
    )
    events = await collect(make_model(server), request(tools=[WEATHER]))

    assert events[:3] == [
        ToolCall("toolu_a", "get_weather", {"city": "Oslo"}),
        ToolCall("toolu_b", "get_weather", {"city": "Rome"}),
        ToolCall("toolu_c", "get_time", {}),
    ]


async def test_input_cut_by_max_tokens_keeps_the_raw_text(server: WireServer) -> None:
    server.add(stream(tool_block(0, "toolu_1", "get_weather", '{"city": "Par'), stop="max_tokens"))
    events = await collect(make_model(server), request(tools=[WEATHER]))
    assert events[0] == ToolCall("toolu_1", "get_weather", None, raw_arguments='{"city": "Par')


async def test_settings_are_forwarded(server: WireServer) -> None:
    server.add(text("ok"), text("ok"))
    model = make_model(server, max_tokens=1000)
    await collect(model, request())
    await collect(
        model,
        request(settings=ModelSettings(temperature=0.3, top_p=0.8, max_tokens=222, timeout=30.0)),
    )

    first, second = server.bodies()
    assert first["max_tokens"] == 1000 and "temperature" not in first
    assert second["max_tokens"] == 222
    assert second["temperature"] == 0.3 and second["top_p"] == 0.8


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


# ---- an agent against the server --------------------------------------------------------------


async def test_agent_round_trip_sends_the_tool_result_back(server: WireServer) -> None:
    server.add(
        stream(
            tool_block(0, "toolu_w", "get_weather", '{"city": ', '"Oslo"}'),
            stop="tool_use",
            usage=(50, 20),
        ),
        text("Sunny ", "in Oslo.", usage=(90, 5)),
    )
    agent = define_agent(
        name="weather",
        model=make_model(server),
        instructions="You report weather.",
        tools=[get_weather],
    )
    result = await agent.run("Weather in Oslo?")

    assert result.output == "Sunny in Oslo."
    first, second = server.bodies()
    assert first["tools"][0]["name"] == "get_weather"
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
    thread = agent.thread(result.thread_id)
    assert thread.usage == Usage(140, 25, 2)
    assert thread.messages[1].usage == Usage(50, 20, 1)
    assert thread.messages[-1].model == "anthropic:claude-test"


async def test_broken_input_goes_back_as_an_error_result(server: WireServer) -> None:
    server.add(
        stream(tool_block(0, "toolu_1", "get_weather", '{"city": Oslo'), stop="tool_use"),
        text("Let me try again."),
    )
    agent = define_agent(name="weather", model=make_model(server), tools=[get_weather])
    result = await agent.run("Weather?")

    assert result.output == "Let me try again."
    [block] = server.requests[1].body["messages"][-1]["content"]
    assert block["type"] == "tool_result" and block["is_error"] is True
    assert "not a JSON object" in json.loads(block["content"])["error"]


async def test_a_failed_turn_keeps_what_completed(server: WireServer) -> None:
    server.add(
        stream(tool_block(0, "toolu_1", "get_weather", '{"city": "Oslo"}'), stop="tool_use"),
        error(400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"),
    )
    agent = define_agent(name="weather", model=make_model(server), tools=[get_weather])
    with pytest.raises(ContextTooLong) as info:
        await agent.run("Weather in Oslo?")

    thread = agent.thread(info.value.result.thread_id)
    assert "prompt is too long" in (thread.error or "")
    assert [m.role for m in thread.messages] == ["user", "assistant", "tool"]


async def test_cancelling_the_run_closes_the_request(server: WireServer) -> None:
    server.add(Reply(events=[message_start(), *text_block(0, "Thinking")[:3]], hold=True))
    agent = define_agent(name="slow", model=make_model(server))
    started = asyncio.Event()

    def on_event(e: object) -> None:
        if isinstance(e, TextDelta):
            started.set()

    task = asyncio.create_task(agent.run("Think hard", on_event=on_event))
    await asyncio.wait_for(started.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.to_thread(server.disconnected.wait, 10), "the stream stayed open"
    [info] = agent.threads()
    assert "interrupted" in (agent.thread(info.id).error or "")


# ---- failures ----------------------------------------------------------------------------------


async def test_missing_key_names_the_variable_and_sends_nothing() -> None:
    from loom_nb.models import allow_model_requests

    agent = define_agent(name="a", model="anthropic:claude-sonnet-4-5")
    with allow_model_requests(True), pytest.raises(MissingAPIKey) as info:
        await agent.run("hello")
    assert "ANTHROPIC_API_KEY" in str(info.value) and "Nothing was sent" in str(info.value)
    assert info.value.result.thread.error == str(info.value)


async def test_key_and_base_url_from_the_environment(
    server: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    server.add(text("ok"))
    model = opened(resolve_model("anthropic:claude-test"))
    assert [e async for e in model.stream(request())] == [TextDelta("ok"), Usage(25, 10, 1)]
    assert sent_key(server.requests[0].headers) == "sk-ant-env"


async def test_wrong_key(server: WireServer) -> None:
    server.add(error(401, "authentication_error", "invalid x-api-key"))
    with pytest.raises(AuthenticationFailed) as info:
        await collect(make_model(server, max_retries=3), request())
    assert "invalid x-api-key" in str(info.value) and "ANTHROPIC_API_KEY" in str(info.value)
    assert len(server.requests) == 1


async def test_wrong_model_name(server: WireServer) -> None:
    server.add(error(404, "not_found_error", "model: claude-nope"))
    model = opened(AnthropicModel("claude-nope", api_key="k", base_url=server.url))
    with pytest.raises(ModelNotFound) as info:
        await collect(model, request())
    assert "'claude-nope'" in str(info.value) and "model: claude-nope" in str(info.value)
    assert len(server.requests) == 1


async def test_request_too_large_is_context_too_long(server: WireServer) -> None:
    server.add(error(413, "request_too_large", "Request exceeds the maximum allowed size."))
    with pytest.raises(ContextTooLong, match="new thread"):
        await collect(make_model(server), request())


async def test_rate_limit_retries_then_succeeds(server: WireServer, sleeps: list[float]) -> None:
    server.add(
        error(429, "rate_limit_error", "Number of request tokens has exceeded your rate limit."),
        error(529, "overloaded_error", "Overloaded"),
        text("done"),
    )
    model = make_model(server, max_retries=2, retry_delay=0.5)
    assert await collect(model, request()) == [TextDelta("done"), Usage(25, 10, 1)]
    assert len(server.requests) == 3
    assert 0.375 <= sleeps[0] <= 0.5 and 0.75 <= sleeps[1] <= 1.0


async def test_rate_limit_gives_up(server: WireServer, sleeps: list[float]) -> None:
    server.add(*[error(429, "rate_limit_error", "slow down", {"retry-after": "2"})] * 4)
    with pytest.raises(RateLimited) as info:
        await collect(make_model(server, max_retries=1), request())
    assert len(server.requests) == 2 and sleeps == [2.0]
    assert info.value.attempts == 2 and info.value.status == 429


async def test_overloaded_error_event_before_any_text_is_retried(
    server: WireServer, sleeps: list[float]
) -> None:
    overloaded = event(
        "error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    )
    server.add(Reply(events=[message_start(), overloaded]), text("second try"))
    assert await collect(make_model(server), request()) == [
        TextDelta("second try"),
        Usage(25, 10, 1),
    ]
    assert len(server.requests) == 2 and len(sleeps) == 1


async def test_error_event_after_text_is_not_retried(
    server: WireServer, sleeps: list[float]
) -> None:
    overloaded = event(
        "error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    )
    server.add(Reply(events=[message_start(), *text_block(0, "Half")[:3], overloaded]))
    seen: list[Any] = []
    with pytest.raises(ProviderError, match="overloaded"):
        async for e in make_model(server).stream(request()):
            seen.append(e)
    assert seen == [TextDelta("Half")]
    assert len(server.requests) == 1 and sleeps == []


async def test_server_unreachable(sleeps: list[float]) -> None:
    from loom_nb.models import allow_model_requests

    model = AnthropicModel("claude-test", api_key="k", base_url=closed_port_url(), max_retries=1)
    with allow_model_requests(True), pytest.raises(ProviderUnreachable) as info:
        await collect(model, request())
    assert "could not connect" in str(info.value) and "ANTHROPIC_BASE_URL" in str(info.value)
    assert info.value.attempts == 2 and len(sleeps) == 1


async def test_requests_turned_off_send_nothing(server: WireServer) -> None:
    from loom_nb.models import allow_model_requests

    server.add(text("never"))
    with allow_model_requests(False), pytest.raises(RuntimeError, match="turned off"):
        await collect(make_model(server), request())
    assert server.requests == []


# ---- resolving and packaging -------------------------------------------------------------------


def test_model_string_resolves() -> None:
    model = resolve_model("anthropic:claude-sonnet-4-5")
    assert isinstance(model, AnthropicModel) and model.name == "anthropic:claude-sonnet-4-5"
    assert model.base_url == "https://api.anthropic.com"


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    monkeypatch.delitem(sys.modules, "loom_nb.models.anthropic")
    with pytest.raises(MissingExtra) as info:
        define_agent(name="a", model="anthropic:claude-sonnet-4-5")
    assert "pip install 'loom-nb[anthropic]'" in str(info.value)


# ---- live --------------------------------------------------------------------------------------


@pytest.mark.live
async def test_live_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """LOOM_LIVE_ANTHROPIC_MODEL=claude-haiku-4-5 ANTHROPIC_API_KEY=... (ANTHROPIC_BASE_URL
    optional)."""
    name = os.environ.get("LOOM_LIVE_ANTHROPIC_MODEL")
    if not name or not os.environ.get("ANTHROPIC_API_KEY"):
        pytest.skip("set LOOM_LIVE_ANTHROPIC_MODEL and ANTHROPIC_API_KEY")
    from _wire import allow_network

    from loom_nb.models import allow_model_requests

    allow_network(monkeypatch)
    agent = define_agent(
        name="live",
        model=AnthropicModel(name, max_tokens=300, max_retries=1),
        instructions="Use your tools; answer briefly.",
        tools=[get_weather],
    )
    with allow_model_requests(True):
        result = await agent.run("Use the tool to get the weather in Oslo, then say it.")
    assert "get_weather" in [r.name for r in result.thread.tool_results()]
    assert result.output
    assert result.usage.input_tokens > 0
