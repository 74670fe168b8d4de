"""The OpenAI adapter: the real openai SDK against a local server speaking Chat Completions."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import httpx2
import pytest
from _wire import (
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

from loom_nb import (
    AuthenticationFailed,
    ContextTooLong,
    Message,
    MissingAPIKey,
    MissingExtra,
    ModelError,
    ModelNotFound,
    ProviderError,
    ProviderUnreachable,
    RateLimited,
    TextDelta,
    ToolCall,
    Usage,
    define_agent,
    memory_store,
    tool,
)
from loom_nb.models import ModelRequest, ModelSettings, ToolDefinition, resolve_model
from loom_nb.models.openai import OpenAIModel, ollama

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


def request(
    prompt: str = "Hi",
    *,
    instructions: str | None = "Be brief.",
    tools: list[ToolDefinition] | None = None,
    settings: ModelSettings | None = None,
) -> ModelRequest:
    return ModelRequest(
        instructions, [Message.user(prompt)], tools or [], settings or ModelSettings()
    )


async def collect(model: OpenAIModel, req: ModelRequest) -> list[Any]:
    return [event async for event in model.stream(req)]


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


async def test_text_streams_piece_by_piece_with_usage(server: WireServer) -> None:
    server.add(text("Hel", "lo", " world", usage=(12, 3)))
    events = await collect(make_model(server), request("Say hello"))

    assert events == [TextDelta("Hel"), TextDelta("lo"), TextDelta(" world"), Usage(12, 3, 1)]
    [sent] = server.requests
    assert sent.method == "POST" and sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.body["model"] == "gpt-test"
    assert sent.body["stream"] is True
    assert sent.body["stream_options"] == {"include_usage": True}
    assert sent.body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Say hello"},
    ]
    assert "tools" not in sent.body  # some servers refuse an empty list


async def test_tool_call_arguments_split_across_chunks(server: WireServer) -> None:
    server.add(
        stream(
            call_start(0, "call_w1", "get_weather"),
            call_args(0, '{"ci'),
            call_args(0, 'ty": "Pa'),
            call_args(0, 'ris"}'),
            finish="tool_calls",
        )
    )
    events = await collect(make_model(server), request(tools=[WEATHER]))

    assert events == [ToolCall("call_w1", "get_weather", {"city": "Paris"}), Usage(10, 5, 1)]
    assert server.requests[0].body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "The weather in a city.",
                "parameters": WEATHER.parameters,
            },
        }
    ]


async def test_several_tool_calls_in_one_turn_interleaved(server: WireServer) -> None:
    server.add(
        stream(
            {"content": "Checking both."},
            call_start(0, "call_a", "get_weather"),
            call_start(1, "call_b", "get_weather"),
            call_args(1, '{"city":'),
            call_args(0, '{"city":'),
            call_args(0, ' "Oslo"}'),
            call_args(1, ' "Rome"}'),
            call_start(2, "call_c", "get_time"),
            finish="tool_calls",
        )
    )
    events = await collect(make_model(server), request(tools=[WEATHER]))

    assert events == [
        TextDelta("Checking both."),
        ToolCall("call_a", "get_weather", {"city": "Oslo"}),
        ToolCall("call_b", "get_weather", {"city": "Rome"}),
        ToolCall("call_c", "get_time", {}),  # no arguments at all: an empty object
        Usage(10, 5, 1),
    ]


async def test_arguments_that_are_not_a_json_object_keep_the_raw_text(server: WireServer) -> None:
    server.add(
        stream(
            call_start(0, "call_1", "get_weather"), call_args(0, '{"city": "Par'), finish="length"
        ),
        stream(
            call_start(0, "call_2", "get_weather"), call_args(0, '["Paris"]'), finish="tool_calls"
        ),
    )
    model = make_model(server)
    first = await collect(model, request(tools=[WEATHER]))
    second = await collect(model, request(tools=[WEATHER]))

    assert first[0] == ToolCall("call_1", "get_weather", None, raw_arguments='{"city": "Par')
    assert second[0] == ToolCall("call_2", "get_weather", None, raw_arguments='["Paris"]')


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


async def test_settings_are_forwarded(server: WireServer) -> None:
    server.add(text("ok"))
    settings = ModelSettings(temperature=0.2, top_p=0.9, max_tokens=123, timeout=30.0)
    await collect(
        make_model(server, extra_body={"options": {"num_ctx": 8192}}), request(settings=settings)
    )

    body = server.requests[0].body
    assert body["temperature"] == 0.2
    assert body["top_p"] == 0.9
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


async def test_openai_itself_gets_max_completion_tokens_and_a_users_client(
    server: WireServer,
) -> None:
    import openai

    client = openai.AsyncOpenAI(
        api_key="sk-mine",
        http_client=httpx2.AsyncClient(transport=_ToLocal(server)),
        max_retries=5,
    )
    model = OpenAIModel("gpt-test", client=client)
    assert model.is_openai
    server.add(text("ok"), error(429, "slow down", "rate_limit_exceeded"))
    OPENED.append(client)  # closed at the end like the models
    await collect(model, request(settings=ModelSettings(max_tokens=50)))
    with pytest.raises(RateLimited):
        await collect(OpenAIModel("gpt-test", client=client, max_retries=0), request())

    body = server.requests[0].body
    assert body["max_completion_tokens"] == 50 and "max_tokens" not in body
    assert server.requests[0].headers["authorization"] == "Bearer sk-mine"
    # The client's own 5 retries are replaced by the adapter's bound (0 here): 1 request.
    assert len(server.requests) == 2


def test_a_sync_client_is_refused_with_advice() -> None:
    import openai

    from loom_nb import UserError

    with pytest.raises(UserError, match=r"openai\.AsyncOpenAI"):
        OpenAIModel("gpt-test", client=openai.OpenAI(api_key="sk"))  # type: ignore[arg-type]


# ---- an agent against the server --------------------------------------------------------------


async def test_agent_round_trip_sends_the_tool_result_back(server: WireServer) -> None:
    server.add(
        stream(
            call_start(0, "call_w1", "get_weather"),
            call_args(0, '{"city": "Oslo"}'),
            finish="tool_calls",
            usage=(20, 7),
        ),
        text("It is ", "sunny in Oslo.", usage=(40, 6)),
    )
    agent = define_agent(
        name="weather",
        model=make_model(server),
        instructions="You report weather.",
        tools=[get_weather],
    )
    result = await agent.run("Weather in Oslo?")

    assert result.status == "complete"
    assert result.output == "It is sunny in Oslo."
    first, second = server.bodies()
    assert [t["function"]["name"] for t in first["tools"]] == ["get_weather"]
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
    # Usage is recorded per model turn and summed on the thread.
    thread = agent.thread(result.thread_id)
    assert [m.usage for m in thread.messages if m.role == "assistant"] == [
        Usage(20, 7, 1),
        Usage(40, 6, 1),
    ]
    assert thread.usage == Usage(60, 13, 2)
    assert thread.messages[-1].model == "openai:gpt-test"


async def test_agent_sends_an_error_result_for_broken_arguments(server: WireServer) -> None:
    server.add(
        stream(
            call_start(0, "call_1", "get_weather"),
            call_args(0, '{"city": Oslo'),
            finish="tool_calls",
        ),
        text("Sorry, let me retry."),
    )
    agent = define_agent(name="weather", model=make_model(server), tools=[get_weather])
    result = await agent.run("Weather in Oslo?")

    assert result.output == "Sorry, let me retry."
    messages = server.requests[1].body["messages"]
    assert messages[-2]["tool_calls"][0]["function"]["arguments"] == "{}"
    tool_message = messages[-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_1"
    assert "not a JSON object" in json.loads(tool_message["content"])["error"]


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
    agent = define_agent(name="weather", model=make_model(server), tools=[get_weather])
    await agent.run("Oslo and Rome?")

    tail = server.requests[1].body["messages"][-2:]
    assert tail == [
        {"role": "tool", "tool_call_id": "a", "content": "Sunny in Oslo, 21 C"},
        {"role": "tool", "tool_call_id": "b", "content": "Sunny in Rome, 21 C"},
    ]


async def test_a_failed_turn_keeps_what_completed(server: WireServer) -> None:
    server.add(
        stream(
            call_start(0, "call_1", "get_weather"),
            call_args(0, '{"city": "Oslo"}'),
            finish="tool_calls",
        ),
        error(401, "Incorrect API key provided: sk-test.", code="invalid_api_key"),
    )
    store = memory_store()
    agent = define_agent(name="weather", model=make_model(server), tools=[get_weather], store=store)
    with pytest.raises(AuthenticationFailed) as info:
        await agent.run("Weather in Oslo?")

    thread = agent.thread(info.value.result.thread_id)
    assert thread.status == "error"
    assert "OPENAI_API_KEY" in (thread.error or "")
    assert [m.role for m in thread.messages] == ["user", "assistant", "tool"]
    assert thread.messages[2].tool_results[0].content == "Sunny in Oslo, 21 C"


async def test_cancelling_the_run_closes_the_request(server: WireServer) -> None:
    server.add(Reply(events=[data(chunk({"role": "assistant", "content": "Thinking"}))], hold=True))
    agent = define_agent(name="slow", model=make_model(server))
    started = asyncio.Event()

    def on_event(event: object) -> None:
        if isinstance(event, TextDelta):
            started.set()

    task = asyncio.create_task(agent.run("Think hard", on_event=on_event))
    await asyncio.wait_for(started.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert await asyncio.to_thread(server.disconnected.wait, 10), "the stream stayed open"
    [info] = agent.threads()
    thread = agent.thread(info.id)
    assert "interrupted" in (thread.error or "")
    assert [m.role for m in thread.messages] == ["user"]


def test_one_model_serves_sync_runs_and_other_event_loops(server: WireServer) -> None:
    """A notebook mixes agent.run_sync(...) (private loop) and `await agent.run(...)` (the
    kernel's loop): the model keeps one connection pool per loop, so both keep working."""
    server.add(text("one"), text("two"), text("three"))
    agent = define_agent(name="mixed", model=make_model(server))

    assert agent.run_sync("first").output == "one"
    assert asyncio.run(agent.run("second")).output == "two"
    assert agent.run_sync("third").output == "three"
    assert len(server.requests) == 3


# ---- failures ----------------------------------------------------------------------------------


async def test_missing_key_names_the_variable_and_sends_nothing() -> None:
    from loom_nb.models import allow_model_requests

    model = resolve_model("openai:gpt-4.1-mini")
    with allow_model_requests(True), pytest.raises(MissingAPIKey) as info:
        await collect(model, request())  # type: ignore[arg-type]
    assert "OPENAI_API_KEY" in str(info.value)
    assert "Nothing was sent" in str(info.value)


async def test_missing_key_ends_the_run_with_a_saved_error() -> None:
    from loom_nb.models import allow_model_requests

    agent = define_agent(name="a", model="openai:gpt-4.1-mini")
    with allow_model_requests(True), pytest.raises(ModelError) as info:
        await agent.run("hello")
    thread = info.value.result.thread
    assert "OPENAI_API_KEY" in (thread.error or "")
    assert [m.role for m in thread.messages] == ["user"]


async def test_key_and_base_url_from_the_environment(
    server: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    server.add(text("ok"))
    model = opened(resolve_model("openai:gpt-test"))
    assert await collect(model, request()) == [TextDelta("ok"), Usage(10, 5, 1)]  # type: ignore[arg-type]
    assert server.requests[0].headers["authorization"] == "Bearer sk-from-env"


async def test_a_compatible_server_needs_no_key(server: WireServer) -> None:
    server.add(text("ok"))
    model = opened(OpenAIModel("llama", base_url=server.url + "/v1"))
    assert await collect(model, request()) == [TextDelta("ok"), Usage(10, 5, 1)]


async def test_wrong_key(server: WireServer) -> None:
    server.add(error(401, "Incorrect API key provided: sk-bad.", code="invalid_api_key"))
    with pytest.raises(AuthenticationFailed) as info:
        await collect(make_model(server, max_retries=3), request())
    message = str(info.value)
    assert "Incorrect API key provided" in message and "OPENAI_API_KEY" in message
    assert info.value.status == 401
    assert len(server.requests) == 1  # never retried


async def test_wrong_model_name(server: WireServer) -> None:
    server.add(
        error(
            404,
            "The model `gpt-tset` does not exist or you do not have access to it.",
            code="model_not_found",
        )
    )
    model = opened(OpenAIModel("gpt-tset", base_url=server.url + "/v1", retry_delay=0))
    with pytest.raises(ModelNotFound) as info:
        await collect(model, request())
    assert "'gpt-tset'" in str(info.value) and "/v1" in str(info.value)
    assert len(server.requests) == 1


async def test_ollama_model_not_pulled(server: WireServer) -> None:
    server.add(error(404, 'model "llama9" not found, try pulling it first', "api_error"))
    model = opened(ollama("llama9", base_url=server.url + "/v1", retry_delay=0))
    with pytest.raises(ModelNotFound, match="ollama pull llama9"):
        await collect(model, request())  # type: ignore[arg-type]


async def test_context_too_long(server: WireServer) -> None:
    server.add(
        error(
            400,
            "This model's maximum context length is 128000 tokens. However, your "
            "messages resulted in 250000 tokens.",
            code="context_length_exceeded",
        )
    )
    with pytest.raises(ContextTooLong) as info:
        await collect(make_model(server), request())
    assert "new thread" in str(info.value)
    assert len(server.requests) == 1


async def test_other_bad_requests_say_what_the_server_said(server: WireServer) -> None:
    server.add(error(400, "Invalid value for 'temperature': must be <= 2."))
    with pytest.raises(ProviderError) as info:
        await collect(make_model(server), request())
    assert type(info.value) is ProviderError
    assert "must be <= 2" in str(info.value)


async def test_a_model_without_tool_support_says_so(server: WireServer) -> None:
    server.add(
        error(400, "registry.ollama.ai/library/gemma:2b does not support tools", "api_error")
    )
    model = opened(ollama("gemma:2b", base_url=server.url + "/v1"))
    with pytest.raises(ProviderError, match="supports tool calling"):
        await collect(model, request(tools=[WEATHER]))  # type: ignore[arg-type]
    assert len(server.requests) == 1


async def test_rate_limit_retries_with_backoff_then_succeeds(
    server: WireServer, sleeps: list[float]
) -> None:
    server.add(
        error(429, "Rate limit reached", "requests", "rate_limit_exceeded"),
        error(429, "Rate limit reached", "requests", "rate_limit_exceeded"),
        text("finally"),
    )
    model = make_model(server, max_retries=3, retry_delay=1.0)
    assert await collect(model, request()) == [TextDelta("finally"), Usage(10, 5, 1)]

    assert len(server.requests) == 3
    assert len(sleeps) == 2
    assert 0.75 <= sleeps[0] <= 1.0 and 1.5 <= sleeps[1] <= 2.0  # doubling, with jitter
    assert server.requests[0].body == server.requests[2].body


async def test_rate_limit_gives_up_after_max_retries(
    server: WireServer, sleeps: list[float]
) -> None:
    server.add(*[error(429, "Rate limit reached", "requests", "rate_limit_exceeded")] * 5)
    with pytest.raises(RateLimited) as info:
        await collect(
            make_model(server, max_retries=2, retry_delay=4.0, max_retry_delay=5.0), request()
        )

    assert len(server.requests) == 3
    assert info.value.attempts == 3
    assert "Gave up after 3 attempts" in str(info.value)
    assert sleeps[1] <= 5.0  # capped at max_retry_delay


async def test_retry_after_is_honoured_and_a_long_one_stops(
    server: WireServer, sleeps: list[float]
) -> None:
    server.add(
        error(429, "slow down", headers={"retry-after-ms": "250"}),
        text("ok"),
        error(429, "come back tomorrow", headers={"retry-after": "86400"}),
    )
    model = make_model(server, max_retries=2)
    await collect(model, request())
    assert sleeps == [0.25]

    with pytest.raises(RateLimited, match="86400"):
        await collect(model, request())
    assert len(server.requests) == 3  # the long wait was not attempted


async def test_quota_exhausted_is_not_retried(server: WireServer, sleeps: list[float]) -> None:
    server.add(
        error(429, "You exceeded your current quota.", "insufficient_quota", "insufficient_quota")
    )
    with pytest.raises(RateLimited, match="billing"):
        await collect(make_model(server, max_retries=3), request())
    assert len(server.requests) == 1 and sleeps == []


async def test_server_errors_are_retried(server: WireServer, sleeps: list[float]) -> None:
    server.add(error(503, "overloaded", "server_error"), text("ok"))
    assert await collect(make_model(server), request()) == [TextDelta("ok"), Usage(10, 5, 1)]
    assert len(server.requests) == 2 and len(sleeps) == 1


async def test_server_unreachable(sleeps: list[float]) -> None:
    from loom_nb.models import allow_model_requests

    model = OpenAIModel("llama", base_url=closed_port_url() + "/v1", max_retries=2)
    with allow_model_requests(True), pytest.raises(ProviderUnreachable) as info:
        await collect(model, request())
    assert "could not connect" in str(info.value)
    assert "Is the server running" in str(info.value)
    assert info.value.attempts == 3 and len(sleeps) == 2


async def test_ollama_not_running_says_how_to_start_it(sleeps: list[float]) -> None:
    from loom_nb.models import allow_model_requests

    model = ollama("llama3.2", base_url=closed_port_url() + "/v1", max_retries=0)
    with allow_model_requests(True), pytest.raises(ProviderUnreachable, match="ollama serve"):
        await collect(model, request())  # type: ignore[arg-type]


async def test_no_answer_in_time(server: WireServer) -> None:
    server.add(Reply(stall=5.0, events=[]))
    model = make_model(server, max_retries=0)
    with pytest.raises(ProviderUnreachable, match="timeout"):
        await collect(model, request(settings=ModelSettings(timeout=0.2)))


async def test_error_inside_the_stream_after_text_is_not_retried(
    server: WireServer, sleeps: list[float]
) -> None:
    server.add(
        Reply(
            events=[
                data(chunk({"role": "assistant", "content": "Part"})),
                data({"error": {"message": "upstream provider failed", "code": 502}}),
            ]
        )
    )
    model = make_model(server)
    seen: list[Any] = []
    with pytest.raises(ProviderError, match="upstream provider failed"):
        async for event in model.stream(request()):
            seen.append(event)
    assert seen == [TextDelta("Part")]  # text already shown is never sent twice
    assert len(server.requests) == 1 and sleeps == []


async def test_a_stream_cut_short_is_an_error(server: WireServer) -> None:
    server.add(Reply(events=[data(chunk({"role": "assistant", "content": "Par"}))], cut=True))
    with pytest.raises(ProviderUnreachable):
        await collect(make_model(server), request())


async def test_requests_turned_off_send_nothing(server: WireServer) -> None:
    from loom_nb.models import allow_model_requests

    server.add(text("never"))
    with allow_model_requests(False), pytest.raises(RuntimeError, match="turned off"):
        await collect(make_model(server), request())
    assert server.requests == []


# ---- resolving and packaging -------------------------------------------------------------------


def test_model_strings_resolve(monkeypatch: pytest.MonkeyPatch) -> None:
    model = resolve_model("openai:gpt-4.1-mini")
    assert isinstance(model, OpenAIModel) and model.name == "openai:gpt-4.1-mini"
    assert model.base_url == "https://api.openai.com/v1"

    local = resolve_model("ollama:llama3.2")
    assert isinstance(local, OpenAIModel) and local.name == "ollama:llama3.2"
    assert local.base_url == "http://localhost:11434/v1"

    monkeypatch.setenv("OLLAMA_HOST", "10.0.0.5:11434")
    assert ollama("llama3.2").base_url == "http://10.0.0.5:11434/v1"


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)
    monkeypatch.delitem(sys.modules, "loom_nb.models.openai")
    with pytest.raises(MissingExtra) as info:
        resolve_model("openai:gpt-4.1-mini")
    assert "pip install 'loom-nb[openai]'" in str(info.value)
    with pytest.raises(MissingExtra):
        define_agent(name="a", model="ollama:llama3.2")


# ---- live --------------------------------------------------------------------------------------


@pytest.mark.live
async def test_live_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """LOOM_LIVE_OPENAI_MODEL=gpt-4.1-mini OPENAI_API_KEY=... (OPENAI_BASE_URL optional)."""
    name = os.environ.get("LOOM_LIVE_OPENAI_MODEL")
    if not name or not (os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL")):
        pytest.skip("set LOOM_LIVE_OPENAI_MODEL and OPENAI_API_KEY (or OPENAI_BASE_URL)")
    from _wire import allow_network

    from loom_nb.models import allow_model_requests

    allow_network(monkeypatch)
    agent = define_agent(
        name="live",
        model=OpenAIModel(name, max_retries=1),
        instructions="Use your tools; answer briefly.",
        tools=[get_weather],
    )
    with allow_model_requests(True):
        result = await agent.run("Use the tool to get the weather in Oslo, then say it.")
    assert "get_weather" in [r.name for r in result.thread.tool_results()]
    assert result.output
    assert result.usage.requests >= 1 and result.usage.input_tokens > 0
