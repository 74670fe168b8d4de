"""Each model adapter as the contract suite sees it: how to make one against the local wire
server, how its wire format says the same things, and where its requests carry them; and the
requests every adapter's tests send.

A new adapter joins the contract suite (``test_contract.py``) with one class here and one
fixture in ``conftest.py``.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

import pytest

import tests.models._anthropic_wire as ant
import tests.models._wire as oai
from loom_nb import Agent, Message, RunResult, define_agent, tool
from loom_nb.models import Model, ModelRequest, ModelSettings, ToolDefinition
from loom_nb.models._base import StreamingAdapter
from tests.models._wire import OPENED, Reply, WireServer

#: One tool call as a test scripts it: (call id, tool name, pieces of its JSON arguments).
Call = tuple[str, str, tuple[str, ...]]

# ---- what the tests ask every adapter --------------------------------------------------------


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


async def collect(model: Model, req: ModelRequest) -> list[Any]:
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


def weather_agent(model: Model, **more: Any) -> Agent:
    """Agent "weather" on ``model`` with the ``get_weather`` tool (``more``: define_agent's
    other arguments)."""
    return define_agent(name="weather", model=model, tools=[get_weather], **more)


async def live_weather(model: Model, monkeypatch: pytest.MonkeyPatch) -> RunResult:
    """A run of a live endpoint's ``model`` (the network allowed for it) asked to use
    ``get_weather``: it called the tool and answered."""
    from loom_nb.models import allow_model_requests

    oai.allow_network(monkeypatch)
    agent = define_agent(
        name="live",
        model=model,
        instructions="Use your tools; answer briefly.",
        tools=[get_weather],
    )
    with allow_model_requests(True):
        result = await agent.run("Use the tool to get the weather in Oslo, then say it.")
    assert "get_weather" in [r.name for r in result.thread.tool_results()]
    assert result.output
    return result


class Case(ABC):
    """One adapter against one local server."""

    id: ClassVar[str]
    #: The SDK's package and the extra that installs it.
    sdk: ClassVar[str]
    module: ClassVar[str]
    #: A model string for the vendor's own API (which needs a key).
    vendor_model: ClassVar[str]
    key_env: ClassVar[str]
    base_url_env: ClassVar[str]
    #: Where requests go, below the server's URL.
    path: ClassVar[str]
    #: What the server says when the conversation does not fit, in the vendor's words.
    too_long: ClassVar[str]

    def __init__(self, server: WireServer) -> None:
        self.server = server

    # ---- models and clients -------------------------------------------------------------

    @abstractmethod
    def base_url(self, server_url: str) -> str: ...

    @abstractmethod
    def model_class(self) -> Callable[..., StreamingAdapter[Any, Any, Any]]: ...

    def model(self, **options: Any) -> StreamingAdapter[Any, Any, Any]:
        """A model on the local server, closed when the test ends; no retry waits."""
        options.setdefault("api_key", "sk-test")
        options.setdefault("retry_delay", 0.0)
        options.setdefault("base_url", self.base_url(self.server.url))
        model = self.model_class()("model-test", **options)
        OPENED.append(model)
        return model

    def opened(self, model: Any) -> Any:
        """Close this model (or client) when the test ends."""
        OPENED.append(model)
        return model

    @abstractmethod
    def async_client(self, **options: Any) -> Any:
        """The SDK's own async client, on the local server."""

    @abstractmethod
    def sync_client(self) -> Any: ...

    @abstractmethod
    def sent_key(self, headers: dict[str, str]) -> str | None: ...

    # ---- the wire format ----------------------------------------------------------------

    @abstractmethod
    def text(self, *pieces: str, usage: tuple[int, int] = (10, 5)) -> Reply:
        """A complete answer in text."""

    @abstractmethod
    def tool_calls(
        self, *calls: Call, usage: tuple[int, int] = (10, 5), cut: bool = False
    ) -> Reply:
        """A complete answer calling tools; ``cut``: stopped by the token limit."""

    @abstractmethod
    def opening(self, *pieces: str) -> list[str]:
        """The start of an answer with these text pieces, and no end."""

    @abstractmethod
    def piece(self, text: str) -> str:
        """One more text piece after :meth:`opening`."""

    @abstractmethod
    def opening_call(self, call: Call) -> list[str]:
        """The start of an answer calling one tool, cut inside its arguments."""

    @abstractmethod
    def malformed(self) -> str:
        """An event whose data is not JSON."""

    @abstractmethod
    def empty(self) -> list[str]:
        """A stream with no event in it."""

    @abstractmethod
    def error(self, status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
        """An HTTP error answer in the vendor's shape, with its usual code for ``status``."""

    @abstractmethod
    def error_event(self, message: str, *, overloaded: bool) -> str:
        """An error event inside a 200 stream: the server is overloaded, or something else."""

    # ---- what the requests carried -------------------------------------------------------

    @abstractmethod
    def tools_sent(self, body: dict[str, Any]) -> list[str]: ...

    @abstractmethod
    def calls_sent(self, body: dict[str, Any]) -> list[str]:
        """The tool names of the past calls a request carries as calls (not as text)."""

    @abstractmethod
    def tool_result_sent(self, body: dict[str, Any]) -> tuple[str, str]:
        """The last tool result in a request: (call id, content)."""

    @abstractmethod
    def rules_broken(self, body: dict[str, Any]) -> list[str]:
        """The vendor's rules for a conversation that ``body`` breaks, in the words of the
        400 its API answers (none: the vendor takes it)."""


#: What a tool's name and a call's id may be (both vendors' patterns; Anthropic's docs now
#: allow names of 128 characters, OpenAI's 64).
_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_ID = re.compile(r"[a-zA-Z0-9_-]+")

#: A data block as loom_nb writes one (``loom_nb._render.data_block``), up to its closing line.
_DATA_BLOCK = re.compile(r"<data-([0-9a-f]{16})[^>\n]*>\n.*?\n</data-\1>", re.S)


def _strings(body: Any) -> list[str]:
    """Every string in a request's JSON ``body``: texts, names, ids, keys, tools."""
    if isinstance(body, str):
        return [body]
    if isinstance(body, dict):
        return [s for k, v in body.items() for s in [k, *_strings(v)]]
    if isinstance(body, list):
        return [s for v in body for s in _strings(v)]
    return []


def outside_data_blocks(body: Any) -> list[str]:
    """The strings of a request's JSON ``body`` with their data blocks cut out: what the model
    reads as anything but data."""
    return [_DATA_BLOCK.sub("", s) for s in _strings(body)]


def data_blocks(body: Any) -> list[str]:
    """The data blocks in the strings of a request's JSON ``body``, whole."""
    return [m.group(0) for s in _strings(body) for m in _DATA_BLOCK.finditer(s)]


class OpenAICase(Case):
    id = "openai"
    sdk = "openai"
    module = "loom_nb.models.openai"
    vendor_model = "openai:gpt-4.1-mini"
    key_env = "OPENAI_API_KEY"
    base_url_env = "OPENAI_BASE_URL"
    path = "/v1/chat/completions"
    too_long = (
        "This model's maximum context length is 128000 tokens. However, your messages "
        "resulted in 250000 tokens."
    )

    def base_url(self, server_url: str) -> str:
        return server_url + "/v1"

    def model_class(self) -> Callable[..., StreamingAdapter[Any, Any, Any]]:
        from loom_nb.models.openai import OpenAIModel

        return OpenAIModel

    def async_client(self, **options: Any) -> Any:
        import openai

        return openai.AsyncOpenAI(base_url=self.base_url(self.server.url), **options)

    def sync_client(self) -> Any:
        import openai

        return openai.OpenAI(api_key="sk")

    def sent_key(self, headers: dict[str, str]) -> str | None:
        return headers.get("authorization", "").removeprefix("Bearer ") or None

    def text(self, *pieces: str, usage: tuple[int, int] = (10, 5)) -> Reply:
        return oai.text(*pieces, usage=usage)

    def tool_calls(
        self, *calls: Call, usage: tuple[int, int] = (10, 5), cut: bool = False
    ) -> Reply:
        deltas: list[dict[str, Any]] = []
        for index, (call_id, name, pieces) in enumerate(calls):
            deltas.append(oai.call_start(index, call_id, name))
            deltas += [oai.call_args(index, p) for p in pieces]
        return oai.stream(*deltas, finish="length" if cut else "tool_calls", usage=usage)

    def opening(self, *pieces: str) -> list[str]:
        first = oai.data(oai.chunk({"role": "assistant", "content": ""}))
        return [first, *(self.piece(p) for p in pieces)]

    def piece(self, text: str) -> str:
        return oai.data(oai.chunk({"content": text}))

    def opening_call(self, call: Call) -> list[str]:
        call_id, name, pieces = call
        deltas = [oai.call_start(0, call_id, name), *(oai.call_args(0, p) for p in pieces)]
        return [*self.opening(), *(oai.data(oai.chunk(d)) for d in deltas)]

    def malformed(self) -> str:
        return 'data: {"choices": [{"index": 0, "delta": {"content": "x"\n\n'

    def empty(self) -> list[str]:
        return [oai.data("[DONE]")]

    def error(self, status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
        code = {401: "invalid_api_key", 404: "model_not_found", 429: "rate_limit_exceeded"}
        kind = "server_error" if status >= 500 else "invalid_request_error"
        body = {
            "error": {"message": message, "type": kind, "param": None, "code": code.get(status)}
        }
        return Reply(status, body, headers=headers or {})

    def error_event(self, message: str, *, overloaded: bool) -> str:
        code = "server_error" if overloaded else "invalid_prompt"
        return oai.data({"error": {"message": message, "type": code, "code": code}})

    def tools_sent(self, body: dict[str, Any]) -> list[str]:
        return [t["function"]["name"] for t in body.get("tools", [])]

    def calls_sent(self, body: dict[str, Any]) -> list[str]:
        return [c["function"]["name"] for m in body["messages"] for c in m.get("tool_calls") or []]

    def tool_result_sent(self, body: dict[str, Any]) -> tuple[str, str]:
        last = [m for m in body["messages"] if m["role"] == "tool"][-1]
        return last["tool_call_id"], last["content"]

    def rules_broken(self, body: dict[str, Any]) -> list[str]:
        broken: list[str] = [
            f"tools[{i}].function.name: string does not match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
            for i, t in enumerate(body.get("tools", []))
            if not _NAME.fullmatch(t["function"]["name"])
        ]
        waiting: list[str] = []  # the calls the next "tool" messages must answer
        seen: set[str] = set()
        for i, m in enumerate(body["messages"]):
            if waiting and m["role"] != "tool":
                broken.append(
                    f"messages.{i}: an assistant message with 'tool_calls' must be followed by "
                    f"tool messages responding to each 'tool_call_id': {waiting}"
                )
                waiting = []
            if m["role"] == "assistant":
                calls = m.get("tool_calls") or []
                if m.get("content") is None and not calls:
                    broken.append(f"messages.{i}: 'content' is required without 'tool_calls'")
                for c in calls:
                    if c["id"] in seen:
                        broken.append(f"messages.{i}: duplicate tool_call id {c['id']}")
                    if len(c["id"]) > 40:
                        broken.append(
                            f"Invalid 'messages[{i}].tool_calls[0].id': string too long. "
                            "Expected a string with maximum length 40"
                        )
                    seen.add(c["id"])
                    if not _NAME.fullmatch(c["function"]["name"]):
                        broken.append(f"messages.{i}: invalid function name")
                    if not isinstance(json.loads(c["function"]["arguments"]), dict):
                        broken.append(f"messages.{i}: arguments are not a JSON object")
                waiting = [c["id"] for c in calls]
            elif m["role"] == "tool":
                if m["tool_call_id"] not in waiting:
                    broken.append(
                        f"messages.{i}: messages with role 'tool' must be a response to a "
                        "preceding message with 'tool_calls'"
                    )
                else:
                    waiting.remove(m["tool_call_id"])
                if not isinstance(m.get("content"), str):
                    broken.append(f"messages.{i}: a tool message needs its content")
        if waiting:
            broken.append(f"the last tool calls have no tool messages: {waiting}")
        return broken


class AnthropicCase(Case):
    id = "anthropic"
    sdk = "anthropic"
    module = "loom_nb.models.anthropic"
    vendor_model = "anthropic:claude-sonnet-4-5"
    key_env = "ANTHROPIC_API_KEY"
    base_url_env = "ANTHROPIC_BASE_URL"
    path = "/v1/messages"
    too_long = "prompt is too long: 210000 tokens > 200000 maximum"

    def base_url(self, server_url: str) -> str:
        return server_url

    def model_class(self) -> Callable[..., StreamingAdapter[Any, Any, Any]]:
        from loom_nb.models.anthropic import AnthropicModel

        return AnthropicModel

    def async_client(self, **options: Any) -> Any:
        import anthropic

        return anthropic.AsyncAnthropic(base_url=self.server.url, **options)

    def sync_client(self) -> Any:
        import anthropic

        return anthropic.Anthropic(api_key="sk")

    def sent_key(self, headers: dict[str, str]) -> str | None:
        """``x-api-key``, or a bearer token (newer SDKs)."""
        if "x-api-key" in headers:
            return headers["x-api-key"]
        return headers.get("authorization", "").removeprefix("Bearer ") or None

    def text(self, *pieces: str, usage: tuple[int, int] = (10, 5)) -> Reply:
        return ant.text(*pieces, usage=usage)

    def tool_calls(
        self, *calls: Call, usage: tuple[int, int] = (10, 5), cut: bool = False
    ) -> Reply:
        blocks = [ant.tool_block(i, c, n, *p) for i, (c, n, p) in enumerate(calls)]
        return ant.stream(*blocks, stop="max_tokens" if cut else "tool_use", usage=usage)

    def opening(self, *pieces: str) -> list[str]:
        return [ant.message_start(), ant.text_start(0), *(self.piece(p) for p in pieces)]

    def piece(self, text: str) -> str:
        return ant.text_delta(0, text)

    def opening_call(self, call: Call) -> list[str]:
        call_id, name, pieces = call
        start = ant.tool_start(0, call_id, name)
        return [ant.message_start(), start, *(ant.tool_json(0, p) for p in pieces)]

    def malformed(self) -> str:
        return 'event: content_block_delta\ndata: {"type": "content_block_delta", "ind\n\n'

    def empty(self) -> list[str]:
        return []

    def error(self, status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
        kind = {
            400: "invalid_request_error",
            401: "authentication_error",
            404: "not_found_error",
            413: "request_too_large",
            429: "rate_limit_error",
            529: "overloaded_error",
        }.get(status, "api_error")
        return ant.error(status, kind, message, headers)

    def error_event(self, message: str, *, overloaded: bool) -> str:
        return ant.error_event(
            "overloaded_error" if overloaded else "invalid_request_error", message
        )

    def tools_sent(self, body: dict[str, Any]) -> list[str]:
        return [t["name"] for t in body.get("tools", [])]

    def calls_sent(self, body: dict[str, Any]) -> list[str]:
        return [
            b["name"]
            for m in body["messages"]
            if isinstance(m["content"], list)
            for b in m["content"]
            if b["type"] == "tool_use"
        ]

    def tool_result_sent(self, body: dict[str, Any]) -> tuple[str, str]:
        blocks = [b for m in body["messages"] if m["role"] == "user" for b in m["content"]]
        last = [b for b in blocks if b["type"] == "tool_result"][-1]
        content = last.get("content", "")
        return last["tool_use_id"], content if isinstance(content, str) else json.dumps(content)

    def rules_broken(self, body: dict[str, Any]) -> list[str]:
        broken: list[str] = [
            f"tools.{i}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
            for i, t in enumerate(body.get("tools", []))
            if not _NAME.fullmatch(t["name"])
        ]
        messages = body["messages"]
        if not messages or messages[0]["role"] != "user":
            broken.append("messages: the first message must use the user role")
        used: list[str] = []  # the tool_use ids of the assistant turn before
        any_tool_block = False
        for i, m in enumerate(messages):
            if i and m["role"] == messages[i - 1]["role"]:
                broken.append(f"messages.{i}: roles must alternate between user and assistant")
            blocks = m["content"]
            if isinstance(blocks, str):
                blocks = [{"type": "text", "text": blocks}]
            if not blocks:
                broken.append(f"messages.{i}: all messages must have non-empty content")
            for b in blocks:
                if b["type"] == "text" and not b["text"]:
                    broken.append(f"messages.{i}: text content blocks must be non-empty")
            any_tool_block |= any(b["type"] in ("tool_use", "tool_result") for b in blocks)
            if m["role"] == "user":
                results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
                if any(b["type"] == "tool_result" for b in blocks[len(results) :]):
                    broken.append(f"messages.{i}: tool_result blocks must come first")
                if set(used) - set(results):
                    broken.append(
                        f"messages.{i - 1}: `tool_use` ids were found without `tool_result` "
                        f"blocks immediately after: {sorted(set(used) - set(results))}"
                    )
                if set(results) - set(used):
                    broken.append(f"messages.{i}: unexpected `tool_use_id` in `tool_result`")
                used = []
            else:
                if used:
                    broken.append(f"messages.{i - 1}: `tool_use` ids without `tool_result`")
                uses = [b for b in blocks if b["type"] == "tool_use"]
                for b in uses:
                    if not _ID.fullmatch(b["id"]) or not _NAME.fullmatch(b["name"]):
                        broken.append(f"messages.{i}: a tool_use id or name is invalid")
                    if not isinstance(b["input"], dict):
                        broken.append(f"messages.{i}: a tool_use input is not an object")
                used = [b["id"] for b in uses]
        if used:
            broken.append("the last assistant turn's tool_use blocks have no tool_result")
        if any_tool_block and not body.get("tools"):
            broken.append(
                "Requests which include `tool_use` or `tool_result` blocks must define tools."
            )
        return broken
