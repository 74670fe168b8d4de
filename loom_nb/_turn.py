"""The loop's two steps that touch no store: one model turn, and one tool call.

Given what they need and nothing more, so ``_run`` keeps only the order of things and the
saving.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from loom_nb._context import RunContext
from loom_nb._errors import LoomError, ModelError
from loom_nb._messages import Message, TextPart, ToolCall, ToolResult, Usage
from loom_nb._tools import Tool, ToolInputError
from loom_nb.models import Model, ModelRequest, ModelSettings, TextDelta, ToolDefinition

REJECTED = "The user rejected this call; nothing was run or written."


async def model_turn(
    model: Model,
    instructions: str | None,
    tools: Mapping[str, Tool],
    settings: ModelSettings,
    messages: Sequence[Message],
    on_delta: Callable[[TextDelta], Awaitable[None]],
) -> Message:
    """Stream one answer of ``model`` to ``messages``; the assistant message it made."""
    request = ModelRequest(
        instructions=instructions,
        messages=list(messages),
        tools=[ToolDefinition(t.name or n, t.description, t.parameters) for n, t in tools.items()],
        settings=settings,
    )
    text: list[str] = []
    calls: list[ToolCall] = []
    usage = Usage()
    stream = model.stream(request)
    try:
        async for event in stream:
            if isinstance(event, TextDelta):
                text.append(event.text)
                await on_delta(event)
            elif isinstance(event, ToolCall):
                calls.append(event)
            elif isinstance(event, Usage):
                usage = usage + event
    except (LoomError, asyncio.CancelledError):
        raise
    except Exception as exc:
        raise ModelError(f"{model.name} failed: {type(exc).__name__}: {exc}") from exc
    finally:  # a cancelled run releases the provider's response now, not at garbage collection
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()
    parts: list[Any] = [TextPart("".join(text))] if text else []
    return Message("assistant", parts + calls, usage=usage, model=model.name)


def check_call(call: ToolCall, tools: Mapping[str, Tool]) -> Tool | ToolResult:
    """The tool to run ``call`` with, or the error result the model gets instead."""
    tool = tools.get(call.name)
    if tool is None:
        return error_result(
            call,
            f"There is no tool named {call.name!r}. Available tools: "
            f"{', '.join(sorted(tools)) or 'none'}.",
        )
    if call.arguments is None:
        return error_result(
            call,
            f"The arguments for {call.name!r} are not a JSON object: "
            f"{(call.raw_arguments or '')[:200]!r}. Send a JSON object.",
        )
    try:
        tool.validate(call.arguments)
    except ToolInputError as exc:
        return error_result(call, f"Invalid arguments for {call.name!r}: {exc}")
    return tool


async def invoke(call: ToolCall, tool: Tool, ctx: RunContext, approval: Any = None) -> ToolResult:
    """Run ``call``; a failing tool becomes an error result the model reads."""
    try:
        output = await tool.call(call.arguments or {}, ctx)
    except ToolInputError as exc:
        return error_result(call, f"Invalid arguments for {call.name!r}: {exc}")
    except Exception as exc:
        return error_result(call, f"{type(exc).__name__}: {exc}")
    content = output.content or ""
    if output.is_error and not content.startswith("{"):
        content = json.dumps({"error": content})
    return ToolResult(call.id, call.name, content, output.data, output.is_error, approval)


def error_result(call: ToolCall, message: str, approval: Any = None) -> ToolResult:
    return ToolResult(
        call.id, call.name, json.dumps({"error": message}), is_error=True, approval=approval
    )


def rejected(call: ToolCall) -> ToolResult:
    return error_result(call, REJECTED, "rejected")
