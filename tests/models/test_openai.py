"""What only the OpenAI adapter does: the Chat Completions request, compatible servers' quirks,
Ollama. What every adapter does is in ``test_contract.py``."""

from __future__ import annotations

import json
import os
from typing import Any

import httpx2
import pytest

from loom_nb import (
    ModelNotFound,
    ProviderError,
    ProviderUnreachable,
    RateLimited,
    TextDelta,
    ToolCall,
    Usage,
)
from loom_nb.models import ModelSettings, resolve_model
from loom_nb.models.openai import OpenAIModel, ollama
from tests.models._adapters import WEATHER, collect, live_weather, request, weather_agent
from tests.models._wire import (
    OPENED,
    Reply,
    WireServer,
    call_args,
    call_start,
    chunk,
    closed_port_url,
    data,
    stream,
    text,
)

# ---- the wire format -------------------------------------------------------------------------


def error(
    status: int,
    message: str,
    type_: str = "invalid_request_error",
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> Reply:
    body = {"error": {"message": message, "type": type_, "param": None, "code": code}}
    return Reply(status, body, headers=headers or {})


# ---- helpers -----------------------------------------------------------------------------------


def make_model(server: WireServer, **options: Any) -> OpenAIModel:
    options.setdefault("api_key", "sk-test")
    options.setdefault("retry_delay", 0.0)
    model = OpenAIModel("gpt-test", base_url=server.url + "/v1", **options)
    OPENED.append(model)
    return model


def opened(model: Any) -> Any:
    """Close this model's connections when the test ends."""
    OPENED.append(model)
    return model


# ---- the request -------------------------------------------------------------------------------


async def test_the_request_is_a_streamed_chat_completion(server: WireServer) -> None:
    server.add(
        stream(
            call_start(0, "call_w1", "get_weather"),
            call_args(0, '{"city": "Paris"}'),
            finish="tool_calls",
        )
    )
    await collect(make_model(server), request("Say hello", tools=[WEATHER]))

    [sent] = server.requests
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.body["stream_options"] == {"include_usage": True}
    assert sent.body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Say hello"},
    ]
    assert sent.body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "The weather in a city.",
                "parameters": WEATHER.parameters,
            },
        }
    ]


async def test_a_compatible_server_gets_max_tokens_and_extra_body(server: WireServer) -> None:
    server.add(text("ok"))
    settings = ModelSettings(max_tokens=123)
    model = make_model(server, extra_body={"options": {"num_ctx": 8192}})
    await collect(model, request(settings=settings))

    body = server.requests[0].body
    assert body["max_tokens"] == 123  # compatible servers know max_tokens
    assert "max_completion_tokens" not in body
    assert body["options"] == {"num_ctx": 8192}


class _ToLocal(httpx2.AsyncHTTPTransport):
    """Sends requests meant for api.openai.com to the local server instead."""

    def __init__(self, server: WireServer) -> None:
        super().__init__()
        self.target = httpx2.URL(server.url)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        request.url = request.url.copy_with(
            scheme=self.target.scheme, host=self.target.host, port=self.target.port
        )
        return await super().handle_async_request(request)


async def test_openai_itself_gets_max_completion_tokens(server: WireServer) -> None:
    import openai

    client = openai.AsyncOpenAI(
        api_key="sk-mine", http_client=httpx2.AsyncClient(transport=_ToLocal(server))
    )
    OPENED.append(client)  # closed at the end like the models
    model = OpenAIModel("gpt-test", client=client)
    assert model.is_openai
    server.add(text("ok"))
    await collect(model, request(settings=ModelSettings(max_tokens=50)))

    body = server.requests[0].body
    assert body["max_completion_tokens"] == 50 and "max_tokens" not in body


# ---- streamed chunks -----------------------------------------------------------------------------


async def test_several_tool_calls_interleaved_by_index(server: WireServer) -> None:
    server.add(
        stream(
            {"content": "Checking both."},
            call_start(0, "call_a", "get_weather"),
            call_start(1, "call_b", "get_weather"),
            call_args(1, '{"city":'),
            call_args(0, '{"city":'),
            call_args(0, ' "Oslo"}'),
            call_args(1, ' "Rome"}'),
            finish="tool_calls",
        )
    )
    events = await collect(make_model(server), request(tools=[WEATHER]))

    assert events == [
        TextDelta("Checking both."),
        ToolCall("call_a", "get_weather", {"city": "Oslo"}),
        ToolCall("call_b", "get_weather", {"city": "Rome"}),
        Usage(10, 5, 1),
    ]


async def test_compatible_server_quirks(server: WireServer) -> None:
    """Usage with "choices": null (vLLM), pieces without index (some proxies), no usage."""
    events = [
        data(chunk({"role": "assistant", "content": "ok"})),
        data(
            chunk(
                {
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": "{}"},
                        }
                    ]
                }
            )
        ),
        data(
            chunk(
                {
                    "tool_calls": [
                        {
                            "id": "c2",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
                        }
                    ]
                }
            )
        ),
        data(chunk(finish="tool_calls")),
        data(
            {
                "id": "x",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "m",
                "choices": None,
                "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9},
            }
        ),
        data("[DONE]"),
    ]
    server.add(Reply(events=events))
    server.add(Reply(events=[data(chunk({"content": "no usage"})), data("[DONE]")]))
    model = make_model(server)

    assert await collect(model, request()) == [
        TextDelta("ok"),
        ToolCall("c1", "get_weather", {}),
        ToolCall("c2", "get_weather", {"city": "Rome"}),
        Usage(7, 2, 1),
    ]
    # A server that sends no usage still counts the request.
    assert await collect(model, request()) == [TextDelta("no usage"), Usage(0, 0, 1)]


# ---- the history as Chat Completions messages ---------------------------------------------------


async def test_the_history_goes_back_as_chat_messages(server: WireServer) -> None:
    server.add(
        stream(
            call_start(0, "call_w1", "get_weather"),
            call_args(0, '{"city": "Oslo"}'),
            finish="tool_calls",
        ),
        text("It is sunny in Oslo."),
    )
    agent = weather_agent(make_model(server), instructions="You report weather.")
    await agent.run("Weather in Oslo?")

    first, second = server.bodies()
    assert first["tools"][0]["function"]["parameters"]["properties"]["city"]["type"] == "string"
    assert second["messages"] == [
        {"role": "system", "content": "You report weather."},
        {"role": "user", "content": "Weather in Oslo?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_w1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_w1", "content": "Sunny in Oslo, 21 C"},
    ]


async def test_broken_arguments_go_back_as_an_empty_object(server: WireServer) -> None:
    """Many compatible servers parse the arguments of past calls and refuse broken JSON."""
    server.add(
        stream(
            call_start(0, "call_1", "get_weather"),
            call_args(0, '{"city": Oslo'),
            finish="tool_calls",
        ),
        text("Sorry, let me retry."),
    )
    agent = weather_agent(make_model(server))
    await agent.run("Weather in Oslo?")

    messages = server.requests[1].body["messages"]
    assert messages[-2]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert "not a JSON object" in json.loads(messages[-1]["content"])["error"]


async def test_several_tool_results_become_one_tool_message_each(server: WireServer) -> None:
    server.add(
        stream(
            call_start(0, "a", "get_weather"),
            call_args(0, '{"city": "Oslo"}'),
            call_start(1, "b", "get_weather"),
            call_args(1, '{"city": "Rome"}'),
            finish="tool_calls",
        ),
        text("Both sunny."),
    )
    agent = weather_agent(make_model(server))
    await agent.run("Oslo and Rome?")

    tail = server.requests[1].body["messages"][-2:]
    assert tail == [
        {"role": "tool", "tool_call_id": "a", "content": "Sunny in Oslo, 21 C"},
        {"role": "tool", "tool_call_id": "b", "content": "Sunny in Rome, 21 C"},
    ]


# ---- advice only OpenAI-compatible servers and Ollama need ------------------------------------


async def test_wrong_model_name_on_a_compatible_server_points_at_v1(server: WireServer) -> None:
    server.add(error(404, "The model `gpt-tset` does not exist.", code="model_not_found"))
    with pytest.raises(ModelNotFound, match="GET /models") as info:
        await collect(make_model(server), request())
    assert f"{server.url}/v1" in str(info.value)


async def test_ollama_model_not_pulled(server: WireServer) -> None:
    server.add(error(404, 'model "llama9" not found, try pulling it first', "api_error"))
    model = opened(ollama("llama9", base_url=server.url + "/v1", retry_delay=0))
    with pytest.raises(ModelNotFound, match="ollama pull llama9"):
        await collect(model, request())


async def test_a_model_without_tool_support_says_so(server: WireServer) -> None:
    server.add(
        error(400, "registry.ollama.ai/library/gemma:2b does not support tools", "api_error")
    )
    model = opened(ollama("gemma:2b", base_url=server.url + "/v1"))
    with pytest.raises(ProviderError, match="supports tool calling"):
        await collect(model, request(tools=[WEATHER]))
    assert len(server.requests) == 1


async def test_quota_exhausted_is_not_retried(server: WireServer, sleeps: list[float]) -> None:
    server.add(
        error(429, "You exceeded your current quota.", "insufficient_quota", "insufficient_quota")
    )
    with pytest.raises(RateLimited, match="billing"):
        await collect(make_model(server, max_retries=3), request())
    assert len(server.requests) == 1 and sleeps == []


async def test_ollama_not_running_says_how_to_start_it(sleeps: list[float]) -> None:
    from loom_nb.models import allow_model_requests

    model = ollama("llama3.2", base_url=closed_port_url() + "/v1", max_retries=0)
    with allow_model_requests(True), pytest.raises(ProviderUnreachable, match="ollama serve"):
        await collect(model, request())


# ---- resolving ---------------------------------------------------------------------------------


def test_model_strings_resolve(monkeypatch: pytest.MonkeyPatch) -> None:
    model = resolve_model("openai:gpt-4.1-mini")
    assert isinstance(model, OpenAIModel) and model.name == "openai:gpt-4.1-mini"
    assert model.base_url == "https://api.openai.com/v1"

    local = resolve_model("ollama:llama3.2")
    assert isinstance(local, OpenAIModel) and local.name == "ollama:llama3.2"
    assert local.base_url == "http://localhost:11434/v1"

    monkeypatch.setenv("OLLAMA_HOST", "10.0.0.5:11434")
    assert ollama("llama3.2").base_url == "http://10.0.0.5:11434/v1"


# ---- live --------------------------------------------------------------------------------------


@pytest.mark.live
async def test_live_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """LOOM_LIVE_OPENAI_MODEL=gpt-4.1-mini OPENAI_API_KEY=... (OPENAI_BASE_URL optional)."""
    name = os.environ.get("LOOM_LIVE_OPENAI_MODEL")
    if not name or not (os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL")):
        pytest.skip("set LOOM_LIVE_OPENAI_MODEL and OPENAI_API_KEY (or OPENAI_BASE_URL)")
    result = await live_weather(OpenAIModel(name, max_retries=1), monkeypatch)
    assert result.usage.requests >= 1 and result.usage.input_tokens > 0
