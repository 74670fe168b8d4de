"""OpenAI and every OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio, OpenRouter...)
through the official ``openai`` SDK's Chat Completions API, streamed.

``"openai:<model>"`` resolves to :class:`OpenAIModel`, ``"ollama:<model>"`` to :func:`ollama`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from loom_nb._errors import MissingExtra
from loom_nb._messages import Message, TextPart, ToolCall, ToolResult, Usage
from loom_nb.models import ModelEvent, ModelRequest, TextDelta, ToolDefinition
from loom_nb.models._base import Advice, StreamingAdapter
from loom_nb.models._clients import NO_KEY
from loom_nb.models._deadlines import Deadlines
from loom_nb.models._server_errors import ServerError, body_message, status_error
from loom_nb.models._tool_calls import (
    call_as_text,
    result_as_text,
    sent_id,
    sent_result_id,
    tool_call,
)

try:
    import openai
    from openai import AsyncOpenAI, AsyncStream, omit
    from openai.types.chat import (
        ChatCompletionAssistantMessageParam,
        ChatCompletionChunk,
        ChatCompletionMessageFunctionToolCallParam,
        ChatCompletionMessageParam,
        ChatCompletionToolUnionParam,
    )
    from openai.types.shared_params import FunctionDefinition
except ImportError as exc:  # pragma: no cover - exercised by blocking the import in a test
    raise MissingExtra("openai", "openai", "the OpenAI adapter") from exc

__all__ = ["OpenAIModel", "ollama"]

OPENAI_BASE_URL = "https://api.openai.com/v1"
OLLAMA_BASE_URL = "http://localhost:11434/v1"

_Prepared = tuple[list[ChatCompletionMessageParam], list[ChatCompletionToolUnionParam]]


class OpenAIModel(StreamingAdapter[AsyncOpenAI, _Prepared, ChatCompletionChunk]):
    """A chat model behind the OpenAI Chat Completions API.

    Args:
        model: the model name the server knows (``"gpt-4.1-mini"``, ``"llama3.2"``, ...).
        base_url: the server, e.g. ``"http://localhost:8000/v1"`` for vLLM. Defaults to
            ``OPENAI_BASE_URL``, then OpenAI.
        api_key: defaults to ``OPENAI_API_KEY``. Required for OpenAI itself; a server at
            another ``base_url`` gets a placeholder when no key is set (local servers need
            none; one that does answers 401 and the error says which variable to set).
        client: your own ``openai.AsyncOpenAI`` (then ``base_url`` / ``api_key`` are unused;
            its own retries and timeout give way to the ones below).
        max_retries: extra attempts on rate limits, overload, 5xx and network errors, before
            the first event only; the SDK's own retries are turned off so that this bound is
            the only one.
        retry_delay: the first backoff wait in seconds; it doubles each retry, capped at
            ``max_retry_delay``. A server's ``Retry-After`` is honoured up to 60 s.
        extra_body: extra JSON fields for every request (server-specific options, e.g.
            Ollama's ``{"options": {"num_ctx": 16384}}``).

    Model settings: ``temperature``, ``top_p``, ``max_tokens`` (sent as
    ``max_completion_tokens`` to OpenAI itself, which requires it for its reasoning models, and
    as ``max_tokens`` to other servers, which know that one), and the deadlines
    ``connect_timeout``, ``idle_timeout``, ``turn_timeout`` and ``timeout`` (seconds), and
    ``max_retries``, which wins over the argument above (see
    :class:`~loom_nb.models.ModelSettings`).
    """

    client_class = AsyncOpenAI
    vendor = "OpenAI"
    vendor_host = "api.openai.com"
    default_base_url = OPENAI_BASE_URL
    base_url_env = "OPENAI_BASE_URL"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: AsyncOpenAI | None = None,
        max_retries: int = 2,
        retry_delay: float = 0.5,
        max_retry_delay: float = 8.0,
        extra_body: Mapping[str, Any] | None = None,
        provider: str = "openai",
        api_key_env: str = "OPENAI_API_KEY",
    ) -> None:
        super().__init__(
            model,
            provider=provider,
            base_url=base_url,
            api_key=api_key,
            client=client,
            max_retries=max_retries,
            retry_delay=retry_delay,
            max_retry_delay=max_retry_delay,
        )
        self._api_key_env = api_key_env
        self.extra_body = dict(extra_body) if extra_body else None

    @property
    def is_openai(self) -> bool:
        """True when requests go to OpenAI itself (not a compatible server)."""
        return self.at_vendor

    # ---- the request ------------------------------------------------------------------------

    def _prepare(self, request: ModelRequest) -> _Prepared:
        return map_messages(request.instructions, request.messages), map_tools(request.tools)

    async def _open(
        self, client: AsyncOpenAI, prepared: _Prepared, request: ModelRequest, deadlines: Deadlines
    ) -> AsyncStream[ChatCompletionChunk]:
        messages, tools = prepared
        settings = request.settings
        max_tokens = settings.get("max_tokens")
        use_completion_tokens = self.is_openai
        return await client.chat.completions.create(
            model=self.model_name,
            messages=messages,
            tools=tools if tools else omit,
            stream=True,
            stream_options={"include_usage": True},
            temperature=settings.get("temperature", omit),
            top_p=settings.get("top_p", omit),
            max_tokens=max_tokens if max_tokens is not None and not use_completion_tokens else omit,
            max_completion_tokens=(
                max_tokens if max_tokens is not None and use_completion_tokens else omit
            ),
            timeout=openai.Timeout(deadlines.idle, connect=deadlines.connect),
            extra_body=self.extra_body,
        )

    def _decoder(self) -> _ChunkAssembler:
        return _ChunkAssembler()

    def _new_client(self) -> AsyncOpenAI:
        key = self._api_key or os.environ.get(self._api_key_env)
        if not key and self.is_openai:
            raise self._missing_key()
        return AsyncOpenAI(api_key=key or NO_KEY, base_url=self.base_url, max_retries=0)

    # ---- errors -----------------------------------------------------------------------------

    def _advice(self) -> Advice:
        unreachable = self._unreachable_advice()
        if self.is_openai:
            key = self._key_advice()
            not_found = "Check the model name."
        else:
            key = self._key_advice(" and that base_url is the right server")
            not_found = (
                "Check the model name (list them with GET /models) and base_url: "
                "OpenAI-compatible servers usually serve under /v1."
            )
        if self.provider == "ollama":
            not_found = f"Pull it first with `ollama pull {self.model_name}`, or check the name."
            unreachable = (
                "Is Ollama running? Start it with `ollama serve` (or the Ollama app); set "
                "OLLAMA_HOST or base_url=... if it listens elsewhere."
            )
        return Advice(key, not_found, unreachable)

    def _server_error(self, exc: Exception) -> ServerError | None:
        if isinstance(exc, openai.APIStatusError):
            return status_error(exc, exc.status_code, exc.code)
        if isinstance(exc, openai.APIError) and not isinstance(exc, openai.APIConnectionError):
            # An error event inside the stream: no status, its code says what happened.
            code = str(exc.code or exc.type or "")
            return ServerError(None, body_message(exc.body) or exc.message, code or None)
        return None


def ollama(
    model: str, *, base_url: str | None = None, api_key: str | None = None, **options: Any
) -> OpenAIModel:
    """A model served by Ollama through its OpenAI-compatible API; no key needed.

    ``base_url`` defaults to ``$OLLAMA_HOST/v1`` when OLLAMA_HOST is set, else
    ``http://localhost:11434/v1``.
    """
    if base_url is None:
        host = os.environ.get("OLLAMA_HOST")
        if host:
            host = host if "://" in host else f"http://{host}"
            base_url = host.rstrip("/") + "/v1"
        else:
            base_url = OLLAMA_BASE_URL
    return OpenAIModel(
        model,
        base_url=base_url,
        api_key=api_key or os.environ.get("OLLAMA_API_KEY") or "ollama",
        provider="ollama",
        api_key_env="OLLAMA_API_KEY",
        **options,
    )


# ---- loom messages -> Chat Completions -----------------------------------------------------


def map_messages(
    instructions: str | None, messages: Sequence[Message]
) -> list[ChatCompletionMessageParam]:
    """System instructions, then each message; tool results become one "tool" message each.
    A call whose tool name the API refuses goes as text in its assistant message; its result
    goes as text in a user message after the tool messages that answer that turn's calls."""
    out: list[ChatCompletionMessageParam] = []
    if instructions:
        out.append({"role": "system", "content": instructions})
    sent: dict[str, str | None] = {}  # each call's id as sent, None: as text
    held: list[str] = []  # results of calls sent as text, until the tool messages are out
    for message in messages:
        if held and message.role != "tool":
            out.append({"role": "user", "content": "\n\n".join(held)})
            held = []
        if message.role == "user":
            out.append({"role": "user", "content": message.text})
        elif message.role == "assistant":
            out.append(_assistant(message, sent))
        else:
            for part in message.parts:
                if not isinstance(part, ToolResult):
                    continue
                call_id = sent_result_id(part, sent)
                if call_id is None:
                    held.append(result_as_text(part))
                else:
                    out.append({"role": "tool", "tool_call_id": call_id, "content": part.content})
    if held:
        out.append({"role": "user", "content": "\n\n".join(held)})
    return out


def _assistant(
    message: Message, sent: dict[str, str | None]
) -> ChatCompletionAssistantMessageParam:
    text = "".join(p.text for p in message.parts if isinstance(p, TextPart))
    calls: list[ChatCompletionMessageFunctionToolCallParam] = []
    written: list[str] = []
    for call in message.parts:
        if not isinstance(call, ToolCall):
            continue
        call_id = sent_id(call, sent)
        if call_id is None:
            written.append(call_as_text(call))
            continue
        calls.append(
            {
                "id": call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": _arguments_text(call)},
            }
        )
    if written:
        text = "\n\n".join(t for t in (text, *written) if t)
    out: ChatCompletionAssistantMessageParam = {"role": "assistant", "content": text or None}
    if calls:
        out["tool_calls"] = calls
    elif not text:
        out["content"] = ""
    return out


def _arguments_text(call: ToolCall) -> str:
    if call.arguments is not None:
        return json.dumps(call.arguments, ensure_ascii=False)
    # The model sent broken JSON; its error result quotes it. Many compatible servers parse
    # the arguments of past calls and would refuse the whole request on broken JSON.
    return "{}"


def map_tools(tools: list[ToolDefinition]) -> list[ChatCompletionToolUnionParam]:
    out: list[ChatCompletionToolUnionParam] = []
    for t in tools:
        function: FunctionDefinition = {"name": t.name, "parameters": t.parameters}
        if t.description:
            function["description"] = t.description
        out.append({"type": "function", "function": function})
    return out


# ---- streamed chunks -> events ---------------------------------------------------------------


@dataclass
class _PartialCall:
    id: str | None = None
    name: str = ""
    arguments: str = ""


class _ChunkAssembler:
    """Collects tool-call deltas by index (several calls, arguments split across chunks)."""

    def __init__(self) -> None:
        self._calls: dict[int, _PartialCall] = {}
        self._input_tokens = 0
        self._output_tokens = 0

    def feed(self, chunk: ChatCompletionChunk) -> list[ModelEvent]:
        out: list[ModelEvent] = []
        if chunk.usage is not None:
            self._input_tokens = chunk.usage.prompt_tokens or 0
            self._output_tokens = chunk.usage.completion_tokens or 0
        for choice in chunk.choices or []:  # vLLM sends "choices": null with the usage
            delta = getattr(choice, "delta", None)
            if getattr(choice, "index", 0) not in (0, None) or delta is None:
                continue
            if delta.content:
                out.append(TextDelta(delta.content))
            if delta.refusal:
                out.append(TextDelta(delta.refusal))
            for piece in delta.tool_calls or []:
                # Some servers leave out "index" or "id" on later pieces.
                piece_id: str | None = getattr(piece, "id", None)
                index: int | None = getattr(piece, "index", None)
                if index is None:
                    index = self._index_for(piece_id)
                call = self._calls.setdefault(index, _PartialCall())
                if piece_id:
                    call.id = piece_id
                if piece.function is not None:
                    if piece.function.name:
                        call.name += piece.function.name
                    if piece.function.arguments:
                        call.arguments += piece.function.arguments
        return out

    def _index_for(self, call_id: str | None) -> int:
        """Servers that leave out ``index``: a new id starts a new call."""
        if call_id is None and self._calls:
            return max(self._calls)
        for index, call in self._calls.items():
            if call.id == call_id:
                return index
        return len(self._calls)

    def finish(self) -> list[ModelEvent]:
        """The tool calls, complete now, then the usage."""
        out: list[ModelEvent] = [
            tool_call(c.id, c.name, c.arguments)
            for _, c in sorted(self._calls.items())
            if c.name or c.arguments
        ]
        out.append(Usage(self._input_tokens, self._output_tokens, 1))
        return out
