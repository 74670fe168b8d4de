"""The loop's two steps that touch no store: one model turn, and one tool call.

Given what they need and nothing more, so ``_run`` keeps only the order of things and the
saving.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from loom_nb import _user_errors, _words
from loom_nb._arguments import bounded_call, size_problem, unusable_arguments
from loom_nb._context import RunContext
from loom_nb._errors import LoomError, ModelError
from loom_nb._messages import (
    Message,
    MessagesSoFar,
    PendingApproval,
    TextPart,
    ToolCall,
    ToolResult,
    Usage,
)
from loom_nb._tools import Bound, Tool, ToolInputError, ToolOutput
from loom_nb.models import Model, ModelRequest, ModelSettings, TextDelta, ToolDefinition

REJECTED = f"The user rejected this call; {_words.NOTHING_DONE}."


def definitions(tools: Mapping[str, Tool]) -> list[ToolDefinition]:
    """The tools as the model is told of them."""
    return [_told(n, t) for n, t in tools.items()]


def _told(key: str, tool: Tool) -> ToolDefinition:
    """``tool``'s definition, the one made last time while its name and words are the same
    (runs share it: a run keeps no copy of its tools' schemas)."""
    told = tool._told
    name = tool.name or key
    if (
        told is None
        or told.name != name
        or told.description is not tool.description
        or told.parameters is not tool.parameters
    ):
        told = tool._told = ToolDefinition(name, tool.description, tool.parameters)
    return told  # type: ignore[no-any-return]


async def model_turn(
    model: Model,
    instructions: str | None,
    tools: list[ToolDefinition],
    settings: ModelSettings,
    messages: Sequence[Message],
    on_delta: Callable[[TextDelta], Awaitable[None]] | None,
) -> Message:
    """Stream one answer of ``model`` to ``messages`` (the thread's view: a list of its own,
    or the thread's list, read without a copy); the assistant message it made. ``on_delta``
    gets each piece of text (None: nobody listens)."""
    request = ModelRequest(
        instructions=instructions,
        messages=MessagesSoFar(messages) if isinstance(messages, list) else messages,
        tools=tools,
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
                if on_delta is not None:
                    await on_delta(event)
            elif isinstance(event, ToolCall):
                calls.append(bounded_call(event))  # too large: answered with an error
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


def check_call(call: ToolCall, tools: Mapping[str, Tool]) -> tuple[Tool, Bound] | ToolResult:
    """The tool to run ``call`` with and its validated arguments, or the error result the
    model gets instead."""
    tool = tools.get(call.name)
    if tool is None:
        return error_result(
            call,
            f"There is no tool named {call.name!r}. Available tools: "
            f"{', '.join(sorted(tools)) or 'none'}.",
        )
    if call.arguments is None:
        return error_result(call, unusable_arguments(call))
    try:
        return tool, tool.validate(call.arguments)
    except ToolInputError as exc:
        return error_result(call, f"Invalid arguments for {call.name!r}: {exc}")


async def pending_of(call: ToolCall, tool: Tool, ctx: RunContext) -> PendingApproval | ToolResult:
    """The call as it waits for approval, its preview computed; or the error result the model
    gets when the preview found the call cannot work."""
    preview = await tool.make_preview(call.arguments or {}, ctx, call.id)
    if isinstance(preview, ToolOutput) and preview.is_error:
        raised = _user_errors.kept(_user_errors.preview_key(call.id))
        if raised is not None:  # user code the preview called (a client factory) raised
            _user_errors.keep(call.id, raised)
        return result_of(call, preview)
    return PendingApproval(call.id, call.name, call.arguments or {}, preview)


async def invoke(
    call: ToolCall,
    tool: Tool,
    ctx: RunContext,
    approval: Any = None,
    preview: Any = None,
    *,
    bound: Bound | None = None,
) -> ToolResult:
    """Run ``call`` (``bound``: its arguments as :func:`check_call` validated them just now);
    a failing tool becomes an error result the model reads."""
    if approval is not None:  # an approved call sees its card: it may refuse to do more
        ctx = dataclasses.replace(ctx, approved_preview=preview)
    try:
        with _user_errors.running(call.id):
            if bound is None:
                output = await tool.call(call.arguments or {}, ctx)
            else:
                output = await tool.call_bound(bound, ctx)
    except ToolInputError as exc:
        return error_result(call, f"Invalid arguments for {call.name!r}: {exc}")
    except Exception as exc:
        _user_errors.keep(call.id, exc)  # the views show where the tool raised it
        return error_result(call, f"{type(exc).__name__}: {exc}")
    return result_of(call, output, approval)


def result_of(call: ToolCall, output: ToolOutput, approval: Any = None) -> ToolResult:
    content = output.content or ""
    if output.is_error and not content.startswith("{"):
        content = json.dumps({"error": content})
    data = output.data
    if isinstance(data, (dict, list, tuple)) and size_problem(data, depth_only=True):
        data = None  # the model got the content; data this deep could not be saved
    return ToolResult(call.id, call.name, content, data, output.is_error, approval, output.chart)


def error_result(call: ToolCall, message: str, approval: Any = None) -> ToolResult:
    return ToolResult(
        call.id, call.name, json.dumps({"error": message}), is_error=True, approval=approval
    )


def rejected(call: ToolCall) -> ToolResult:
    return error_result(call, REJECTED, "rejected")
