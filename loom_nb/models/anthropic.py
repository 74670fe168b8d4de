"""Anthropic's Claude models through the official ``anthropic`` SDK's Messages API, streamed.

``"anthropic:<model>"`` resolves to :class:`AnthropicModel`.
"""

from __future__ import annotations

import asyncio
import json
import os
import weakref
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from loom_nb._errors import MissingExtra, UserError
from loom_nb._messages import Message, TextPart, ToolCall, ToolResult, Usage
from loom_nb.models import Model, ModelEvent, ModelRequest, TextDelta, ToolDefinition
from loom_nb.models._common import (
    CONTEXT_ADVICE,
    AuthenticationFailed,
    ContextTooLong,
    MissingAPIKey,
    ModelNotFound,
    ProviderError,
    ProviderUnreachable,
    RateLimited,
    RetryPolicy,
    looks_like_context_overflow,
    parse_retry_after,
    stream_with_retries,
    tool_call,
)

try:
    import anthropic
    from anthropic import AsyncAnthropic, not_given, omit
    from anthropic.types import (
        AssistantMessageParam,
        ContentBlockParam,
        MessageParam,
        RawMessageStreamEvent,
        ToolParam,
        ToolResultBlockParam,
        ToolUnionParam,
        UserMessageParam,
    )
except ImportError as exc:  # pragma: no cover - exercised by blocking the import in a test
    raise MissingExtra("anthropic", "anthropic", "the Anthropic adapter") from exc

__all__ = ["AnthropicModel"]

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
NO_KEY = "not-needed"


class AnthropicModel(Model):
    """A Claude model behind Anthropic's Messages API.

    Args:
        model: e.g. ``"claude-sonnet-4-5"``.
        api_key: defaults to ``ANTHROPIC_API_KEY`` (the SDK also accepts
            ``ANTHROPIC_AUTH_TOKEN`` and its configured profiles).
        base_url: defaults to ``ANTHROPIC_BASE_URL``, then Anthropic. A server at another URL
            gets a placeholder key when none is set.
        client: your own ``anthropic.AsyncAnthropic`` (then ``api_key`` / ``base_url`` are
            unused).
        max_tokens: the reply limit; the Messages API requires one. ``model_settings``'s
            ``max_tokens`` overrides it per agent.
        max_retries, retry_delay, max_retry_delay: bounded retries with exponential backoff
            on rate limits, overload (529), 5xx and network errors; the SDK's own retries are
            turned off so that this bound is the only one.

    Model settings: ``temperature``, ``top_p``, ``max_tokens``, ``timeout`` (seconds).
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: AsyncAnthropic | None = None,
        max_tokens: int = 4096,
        max_retries: int = 2,
        retry_delay: float = 0.5,
        max_retry_delay: float = 8.0,
    ) -> None:
        self.model_name = model
        self.name = f"anthropic:{model}"
        self.max_tokens = max_tokens
        self._api_key = api_key
        self._base_url = base_url
        self.retry = RetryPolicy(max_retries, retry_delay, max_retry_delay)
        if client is not None and not isinstance(client, AsyncAnthropic):
            raise UserError(
                f"client= takes an anthropic.AsyncAnthropic (loom_nb runs are async), "
                f"got {type(client).__name__}"
            )
        self._client = client.with_options(max_retries=0) if client is not None else None
        # One client (and connection pool) per event loop; see OpenAIModel.
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncAnthropic] = (
            weakref.WeakKeyDictionary()
        )

    def __repr__(self) -> str:
        return f"AnthropicModel({self.model_name!r}, base_url={self.base_url!r})"

    @property
    def base_url(self) -> str:
        if self._client is not None:
            return str(self._client.base_url).rstrip("/")
        url = self._base_url or os.environ.get("ANTHROPIC_BASE_URL") or ANTHROPIC_BASE_URL
        return url.rstrip("/")

    @property
    def is_anthropic(self) -> bool:
        return (urlsplit(self.base_url).hostname or "").endswith("api.anthropic.com")

    # ---- the request ------------------------------------------------------------------------

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        client = self._client_for_this_loop()  # raises MissingAPIKey before any request
        messages = map_messages(request.messages)
        tools = map_tools(request.tools)

        def attempt() -> AsyncGenerator[ModelEvent, None]:
            return self._attempt(client, messages, tools, request)

        async for event in stream_with_retries(attempt, self._translate, self.retry):
            yield event

    async def _attempt(
        self,
        client: AsyncAnthropic,
        messages: list[MessageParam],
        tools: list[ToolUnionParam],
        request: ModelRequest,
    ) -> AsyncGenerator[ModelEvent, None]:
        settings = request.settings
        # This SDK's create() has no sampling parameters; the API reads them from the body.
        sampling: dict[str, float] = {}
        if "temperature" in settings:
            sampling["temperature"] = settings["temperature"]
        if "top_p" in settings:
            sampling["top_p"] = settings["top_p"]
        response = await client.messages.create(
            model=self.model_name,
            max_tokens=settings.get("max_tokens", self.max_tokens),
            messages=messages,
            system=request.instructions or omit,
            tools=tools if tools else omit,
            stream=True,
            timeout=settings.get("timeout", not_given),
            extra_body=sampling or None,
        )
        assembler = _EventAssembler()
        async with response:  # closes the HTTP response on cancel, error or early exit
            async for event in response:
                for out in assembler.feed(event):
                    yield out
        yield assembler.usage()

    def _client_for_this_loop(self) -> AsyncAnthropic:
        if self._client is not None:
            return self._client
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = AsyncAnthropic(api_key=self._api_key, base_url=self.base_url, max_retries=0)
            has_credentials = (
                client.api_key or client.auth_token or getattr(client, "_token_cache", None)
            )
            if not has_credentials:
                if self.is_anthropic:
                    raise MissingAPIKey(
                        f"{self.name} needs an Anthropic API key and none is set: set the "
                        "ANTHROPIC_API_KEY environment variable (or pass api_key=... to "
                        "AnthropicModel). Nothing was sent."
                    )
                client = AsyncAnthropic(api_key=NO_KEY, base_url=self.base_url, max_retries=0)
            self._clients[loop] = client
        return client

    async def aclose(self) -> None:
        """Close the connections this model opened on the running event loop (a client you
        passed in stays yours to close). The model stays usable: it reconnects when asked."""
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()

    # ---- errors -----------------------------------------------------------------------------

    def _where(self) -> str:
        return "Anthropic" if self.is_anthropic else f"the server at {self.base_url}"

    def _translate(self, exc: Exception) -> ProviderError:
        name, where = self.name, self._where()
        if isinstance(exc, anthropic.APITimeoutError):
            return ProviderUnreachable(
                f"{name}: {where} did not answer in time. Try again, or allow more time with "
                "model_settings={'timeout': <seconds>}."
            )
        if isinstance(exc, anthropic.APIConnectionError):
            cause = exc.__cause__ or exc
            hint = (
                "Check your network connection."
                if self.is_anthropic
                else "Is the server running? Check base_url=... (or ANTHROPIC_BASE_URL)."
            )
            return ProviderUnreachable(f"{name}: could not connect to {where} ({cause}). {hint}")
        if isinstance(exc, anthropic.APIStatusError):
            return self._status_error(exc)
        return ProviderError(f"{name} failed: {type(exc).__name__}: {exc}")

    def _status_error(self, exc: anthropic.APIStatusError) -> ProviderError:
        name, where = self.name, self._where()
        status = exc.status_code
        kind = exc.type or ""
        message = exc.api_message or _body_message(exc.body) or exc.message
        detail = f"{status if status >= 400 else 'stream'} {kind}: {message}".strip()
        retry_after = parse_retry_after(exc.response.headers)
        if status < 400:  # an "error" event inside a 200 stream: its type says what happened
            status = {"rate_limit_error": 429, "overloaded_error": 529, "api_error": 500}.get(
                kind, 400
            )
        if looks_like_context_overflow(message) or status == 413:
            return ContextTooLong(
                f"{name}: the conversation is too long for the model ({detail}). {CONTEXT_ADVICE}",
                status=status,
            )
        if status in (401, 403):
            what = "refused the API key" if status == 401 else "denied access"
            return AuthenticationFailed(
                f"{name}: {where} {what} ({detail}). Check the key in the ANTHROPIC_API_KEY "
                "environment variable (or api_key=...).",
                status=status,
            )
        if status == 404:
            return ModelNotFound(
                f"{name}: {where} has no model {self.model_name!r} ({detail}). Check the model "
                "name, e.g. 'claude-sonnet-4-5' or 'claude-haiku-4-5'.",
                status=status,
            )
        if status == 402:
            return ProviderError(
                f"{name}: {where} needs payment ({detail}). Check your plan and billing.",
                status=status,
            )
        if status == 429:
            wait = f" The server asked to wait {retry_after:g} s." if retry_after else ""
            return RateLimited(
                f"{name}: {where} is rate limiting requests ({detail}).{wait} Wait a little and "
                "run again, or allow more retries with max_retries=...",
                status=status,
                retry_after=retry_after,
            )
        if status in (408, 409) or status >= 500:
            busy = "is overloaded" if status == 529 else "failed"
            return ProviderError(
                f"{name}: {where} {busy} ({detail}). This is usually temporary: run again later.",
                status=status,
                retry_after=retry_after,
                retryable=True,
            )
        return ProviderError(f"{name}: {where} refused the request ({detail}).", status=status)


# ---- loom messages -> Messages API ---------------------------------------------------------


def map_messages(messages: list[Message]) -> list[MessageParam]:
    """User and tool messages become "user" turns, with tool results first; consecutive turns
    of one role are merged (the API wants them alternating, and all results of one assistant
    turn in the next user turn)."""
    turns: list[tuple[Literal["user", "assistant"], list[ContentBlockParam]]] = []
    for message in messages:
        role: Literal["user", "assistant"] = (
            "assistant" if message.role == "assistant" else "user"
        )
        blocks = _blocks(message)
        if not blocks:
            continue  # the API refuses empty turns
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, blocks))
    out: list[MessageParam] = []
    for role, blocks in turns:
        if role == "user":
            blocks.sort(key=lambda b: 0 if b["type"] == "tool_result" else 1)
            user: UserMessageParam = {"role": "user", "content": blocks}
            out.append(user)
        else:
            assistant: AssistantMessageParam = {"role": "assistant", "content": blocks}
            out.append(assistant)
    return out


def _blocks(message: Message) -> list[ContentBlockParam]:
    blocks: list[ContentBlockParam] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            if part.text:
                blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, ToolCall):
            blocks.append(
                {
                    "type": "tool_use",
                    "id": part.id,
                    "name": part.name,
                    "input": part.arguments if part.arguments is not None else {},
                }
            )
        elif isinstance(part, ToolResult):
            result: ToolResultBlockParam = {"type": "tool_result", "tool_use_id": part.call_id}
            if part.content:
                result["content"] = part.content
            if part.is_error:
                result["is_error"] = True
            blocks.append(result)
    return blocks


def map_tools(tools: list[ToolDefinition]) -> list[ToolUnionParam]:
    out: list[ToolUnionParam] = []
    for t in tools:
        param: ToolParam = {"name": t.name, "input_schema": t.parameters}
        if t.description:
            param["description"] = t.description
        out.append(param)
    return out


# ---- streamed events -> loom events --------------------------------------------------------


@dataclass
class _PartialToolUse:
    id: str
    name: str
    arguments: str = ""
    start_input: Any = None


class _EventAssembler:
    """Text deltas as they come; a tool call once its block stops; usage at the end."""

    def __init__(self) -> None:
        self._tools: dict[int, _PartialToolUse] = {}
        self._input_tokens = 0
        self._output_tokens = 0

    def feed(self, event: RawMessageStreamEvent) -> list[ModelEvent]:
        out: list[ModelEvent] = []
        if event.type == "message_start":
            usage = event.message.usage
            self._input_tokens = (
                (usage.input_tokens or 0)
                + (usage.cache_creation_input_tokens or 0)
                + (usage.cache_read_input_tokens or 0)
            )
            self._output_tokens = usage.output_tokens or 0
        elif event.type == "content_block_start":
            block = event.content_block
            if block.type == "tool_use":
                self._tools[event.index] = _PartialToolUse(block.id, block.name,
                                                           start_input=block.input)
            elif block.type == "text" and block.text:
                out.append(TextDelta(block.text))
        elif event.type == "content_block_delta":
            delta = event.delta
            if delta.type == "text_delta":
                if delta.text:
                    out.append(TextDelta(delta.text))
            elif delta.type == "input_json_delta" and event.index in self._tools:
                self._tools[event.index].arguments += delta.partial_json
        elif event.type == "content_block_stop":
            out.extend(self._finish(event.index))
        elif event.type == "message_delta":
            final = event.usage
            self._output_tokens = final.output_tokens or self._output_tokens
            if final.input_tokens is not None:  # newer servers repeat the (final) input count
                self._input_tokens = max(
                    self._input_tokens,
                    final.input_tokens
                    + (final.cache_creation_input_tokens or 0)
                    + (final.cache_read_input_tokens or 0),
                )
        elif event.type == "message_stop":
            for index in sorted(self._tools):  # blocks a server forgot to stop
                out.extend(self._finish(index))
        return out

    def _finish(self, index: int) -> list[ModelEvent]:
        partial = self._tools.pop(index, None)
        if partial is None:
            return []
        raw = partial.arguments
        if not raw.strip() and partial.start_input:
            raw = json.dumps(partial.start_input)  # a server that sent the input whole
        return [tool_call(partial.id, partial.name, raw)]

    def usage(self) -> Usage:
        return Usage(self._input_tokens, self._output_tokens, 1)


def _body_message(body: object) -> str:
    if isinstance(body, dict):
        if isinstance(body.get("message"), str):
            return str(body["message"])
        if "error" in body:
            return _body_message(body["error"])
        return json.dumps(body)[:500]
    if isinstance(body, str):
        return body[:500]
    return ""
