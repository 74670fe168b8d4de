"""Anthropic's Claude models through the official ``anthropic`` SDK's Messages API, streamed.

``"anthropic:<model>"`` resolves to :class:`AnthropicModel`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from loom_nb._errors import MissingExtra
from loom_nb._messages import Message, TextPart, ToolCall, ToolResult, Usage
from loom_nb.models import ModelEvent, ModelRequest, TextDelta, ToolDefinition
from loom_nb.models._base import Advice, StreamingAdapter
from loom_nb.models._clients import NO_KEY
from loom_nb.models._deadlines import Deadlines
from loom_nb.models._server_errors import ServerError, status_error
from loom_nb.models._tool_calls import (
    call_as_text,
    result_as_text,
    sent_id,
    sent_result_id,
    tool_call,
)

try:
    import anthropic
    from anthropic import AsyncAnthropic, AsyncStream, omit
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

_Prepared = tuple[list[MessageParam], list[ToolUnionParam]]


class AnthropicModel(StreamingAdapter[AsyncAnthropic, _Prepared, RawMessageStreamEvent]):
    """A Claude model behind Anthropic's Messages API.

    Args:
        model: e.g. ``"claude-sonnet-4-5"``.
        api_key: defaults to ``ANTHROPIC_API_KEY`` (the SDK also accepts
            ``ANTHROPIC_AUTH_TOKEN`` and its configured profiles).
        base_url: defaults to ``ANTHROPIC_BASE_URL``, then Anthropic. A server at another URL
            gets a placeholder key when none is set.
        client: your own ``anthropic.AsyncAnthropic`` (then ``api_key`` / ``base_url`` are
            unused; its own retries and timeout give way to the ones below).
        max_tokens: the reply limit; the Messages API requires one. ``model_settings``'s
            ``max_tokens`` overrides it per agent.
        max_retries, retry_delay, max_retry_delay: bounded retries with exponential backoff
            on rate limits, overload (529), 5xx and network errors, before the first event
            only; the SDK's own retries are turned off so that this bound is the only one.

    Model settings: ``temperature``, ``top_p``, ``max_tokens``, and the deadlines
    ``connect_timeout``, ``idle_timeout``, ``turn_timeout`` and ``timeout`` (seconds), and
    ``max_retries``, which wins over the argument above (see
    :class:`~loom_nb.models.ModelSettings`).
    """

    client_class = AsyncAnthropic
    vendor = "Anthropic"
    vendor_host = "api.anthropic.com"
    default_base_url = ANTHROPIC_BASE_URL
    base_url_env = "ANTHROPIC_BASE_URL"
    _api_key_env = "ANTHROPIC_API_KEY"

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
        super().__init__(
            model,
            provider="anthropic",
            base_url=base_url,
            api_key=api_key,
            client=client,
            max_retries=max_retries,
            retry_delay=retry_delay,
            max_retry_delay=max_retry_delay,
        )
        self.max_tokens = max_tokens

    @property
    def is_anthropic(self) -> bool:
        """True when requests go to Anthropic itself."""
        return self.at_vendor

    # ---- the request ------------------------------------------------------------------------

    def _prepare(self, request: ModelRequest) -> _Prepared:
        messages = map_messages(request.messages)
        return messages, map_tools(request.tools) or _named_in(messages)

    async def _open(
        self,
        client: AsyncAnthropic,
        prepared: _Prepared,
        request: ModelRequest,
        deadlines: Deadlines,
    ) -> AsyncStream[RawMessageStreamEvent]:
        messages, tools = prepared
        settings = request.settings
        # Tools only the thread's past calls name (an agent without tools whose answer a
        # strict number check sent back): declared, as the API requires, never to be called.
        only_named = bool(tools) and not request.tools
        # This SDK's create() has no sampling parameters; the API reads them from the body.
        sampling: dict[str, float] = {}
        if "temperature" in settings:
            sampling["temperature"] = settings["temperature"]
        if "top_p" in settings:
            sampling["top_p"] = settings["top_p"]
        return await client.messages.create(
            model=self.model_name,
            max_tokens=settings.get("max_tokens", self.max_tokens),
            messages=messages,
            system=request.instructions or omit,
            tools=tools if tools else omit,
            tool_choice={"type": "none"} if only_named else omit,
            stream=True,
            timeout=anthropic.Timeout(deadlines.idle, connect=deadlines.connect),
            extra_body=sampling or None,
        )

    def _decoder(self) -> _EventAssembler:
        return _EventAssembler()

    def _new_client(self) -> AsyncAnthropic:
        client = AsyncAnthropic(api_key=self._api_key, base_url=self.base_url, max_retries=0)
        # The SDK also finds ANTHROPIC_AUTH_TOKEN and its configured profiles.
        if client.api_key or client.auth_token or getattr(client, "_token_cache", None):
            return client
        if self.is_anthropic:
            raise self._missing_key()
        return AsyncAnthropic(api_key=NO_KEY, base_url=self.base_url, max_retries=0)

    # ---- errors -----------------------------------------------------------------------------

    def _advice(self) -> Advice:
        return Advice(
            key=self._key_advice(),
            not_found="Check the model name, e.g. 'claude-sonnet-4-5' or 'claude-haiku-4-5'.",
            unreachable=self._unreachable_advice(),
        )

    def _server_error(self, exc: Exception) -> ServerError | None:
        if not isinstance(exc, anthropic.APIStatusError):
            return None
        status = exc.status_code
        # Below 400: an "error" event inside a 200 stream.
        return status_error(exc, status if status >= 400 else None, exc.type, exc.api_message)


# ---- loom messages -> Messages API ---------------------------------------------------------


def map_messages(messages: Sequence[Message]) -> list[MessageParam]:
    """User and tool messages become "user" turns, with tool results first; consecutive turns
    of one role are merged (the API wants them alternating, and all results of one assistant
    turn in the next user turn). A call whose tool name the API refuses goes as text, and so
    does its result."""
    turns: list[tuple[Literal["user", "assistant"], list[ContentBlockParam]]] = []
    sent: dict[str, str | None] = {}  # each call's id as sent, None: as text
    for message in messages:
        role: Literal["user", "assistant"] = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message, sent)
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


def _blocks(message: Message, sent: dict[str, str | None]) -> list[ContentBlockParam]:
    blocks: list[ContentBlockParam] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            if part.text:
                blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, ToolCall):
            call_id = sent_id(part, sent)
            if call_id is None:
                blocks.append({"type": "text", "text": call_as_text(part)})
                continue
            blocks.append(
                {
                    "type": "tool_use",
                    "id": call_id,
                    "name": part.name,
                    "input": part.arguments if part.arguments is not None else {},
                }
            )
        elif isinstance(part, ToolResult):
            call_id = sent_result_id(part, sent)
            if call_id is None:
                blocks.append({"type": "text", "text": result_as_text(part)})
                continue
            result: ToolResultBlockParam = {"type": "tool_result", "tool_use_id": call_id}
            if part.content:
                result["content"] = part.content
            if part.is_error:
                result["is_error"] = True
            blocks.append(result)
    return blocks


def _named_in(messages: Sequence[MessageParam]) -> list[ToolUnionParam]:
    """A tool for each name the messages' tool calls use: the API refuses tool blocks in a
    request that defines no tools. (Each name is one it takes: :func:`map_messages` wrote the
    calls of other names as text.)"""
    names = [
        b["name"]
        for m in messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_use"
    ]
    return [{"name": n, "input_schema": {"type": "object"}} for n in dict.fromkeys(names)]


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
                self._tools[event.index] = _PartialToolUse(
                    block.id, block.name, start_input=block.input
                )
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

    def finish(self) -> list[ModelEvent]:
        return [Usage(self._input_tokens, self._output_tokens, 1)]
