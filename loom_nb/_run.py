"""The agent loop: model turn, tool calls, tool results, approvals, saving.

One :class:`Run` drives one thread until it completes, stops for approval, or fails. Each
completed message is appended to the store at once, so an interrupted run keeps what finished.
The loop is given what it reads as one :class:`RunDeps`; it never sees the ``Agent``, so this
module does not import ``loom_nb._agent`` (the agent imports it).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from loom_nb._arguments import bounded_call, size_problem, unusable_arguments
from loom_nb._context import RunContext
from loom_nb._errors import LoomError, ModelError, RunError, StepLimitExceeded, UserError
from loom_nb._events import ApprovalRequested, EventHandler, MessageAdded, RunEvent
from loom_nb._messages import (
    Message,
    MessagesSoFar,
    PendingApproval,
    TextPart,
    Thread,
    ToolCall,
    ToolResult,
    Usage,
    now,
)
from loom_nb._store import Store
from loom_nb._tools import Tool, ToolInputError, ToolOutput
from loom_nb.models import Model, ModelRequest, ModelSettings, TextDelta, ToolDefinition

REJECTED = "The user rejected this call; nothing was run or written."


@dataclass(frozen=True)
class RunDeps:
    """Everything the loop reads from its agent, taken when a run starts."""

    #: The agent's name, given to tools as ``ctx.agent``.
    agent_name: str
    model: Model
    instructions: str | None
    #: By the name the model calls them.
    tools: Mapping[str, Tool]
    store: Store
    settings: ModelSettings
    #: Model turns allowed before the run fails with :class:`StepLimitExceeded`.
    max_steps: int


class Run:
    """One run of the loop over one thread."""

    def __init__(
        self,
        deps: RunDeps,
        thread: Thread,
        context: Mapping[str, Any] | None,
        on_event: EventHandler | None,
    ) -> None:
        self.deps = deps
        self.thread = thread
        self.store = deps.store
        self.on_event = on_event
        self.ctx = RunContext(
            deps.agent_name,
            thread.id,
            thread.user_id,
            dict(context or {}),
            _results=thread.tool_results,
        )
        self.new_messages: list[Message] = []
        self.failure: RunError | None = None

    async def emit(self, event: RunEvent) -> None:
        """Hand ``event`` to ``on_event``, awaiting it if it is async."""
        if self.on_event is not None:
            outcome = self.on_event(event)
            if inspect.isawaitable(outcome):
                await outcome

    async def add(self, message: Message) -> None:
        """Append a completed message: saved at once, so a crash cannot lose it."""
        self.thread.messages.append(message)
        self.thread.updated_at = message.created_at
        self.store.append(self.thread, message)
        self.new_messages.append(message)
        await self.emit(MessageAdded(message, self.thread.id))

    def save(self) -> None:
        """Save the thread's record (status, pending calls, error), not its messages."""
        self.thread.updated_at = now()
        self.store.save_thread(self.thread)

    async def execute(self, prompt: str | None) -> None:
        """Send ``prompt``, or go on after approvals (``None``), until the run ends.

        A :class:`RunError` is recorded and kept in :attr:`failure`; anything else is recorded
        in the thread and raised.
        """
        self.thread.error = None
        try:
            if prompt is not None:
                self.save()
                await self._close_dangling_calls()
                await self.add(Message.user(prompt))
            elif any(p.decision is None for p in self.thread.pending):
                self.save()  # keep the decisions made so far; wait for the rest
                return
            else:
                await self._finish_approvals()
            await self._loop()
        except asyncio.CancelledError:
            self._fail("The run was interrupted; what completed is saved.")
            raise
        except RunError as exc:
            self._fail(str(exc))
            self.failure = exc
        except UserError:
            raise
        except Exception as exc:  # a bug or a store failure: record it, then raise as is
            self._fail(f"{type(exc).__name__}: {exc}")
            raise

    def _fail(self, message: str) -> None:
        self.thread.error = message
        with contextlib.suppress(Exception):  # a failing store must not hide the first error
            self.save()

    async def _loop(self) -> None:
        for _ in range(self.deps.max_steps):
            message = await self._model_turn()
            await self.add(message)
            calls = message.tool_calls
            if not calls:
                self.save()
                return
            if await self._run_calls(calls):
                return  # stopped for approval
        raise StepLimitExceeded(
            f"the agent made {self.deps.max_steps} model turns without finishing; "
            "raise define_agent(max_steps=...) or ask a narrower question"
        )

    async def _model_turn(self) -> Message:
        deps = self.deps
        request = ModelRequest(
            instructions=deps.instructions,
            messages=MessagesSoFar(self.thread.messages),
            tools=[
                ToolDefinition(t.name or n, t.description, t.parameters)
                for n, t in deps.tools.items()
            ],
            settings=deps.settings,
        )
        text: list[str] = []
        calls: list[ToolCall] = []
        usage = Usage()
        stream = deps.model.stream(request)
        try:
            async for event in stream:
                if isinstance(event, TextDelta):
                    text.append(event.text)
                    await self.emit(event)
                elif isinstance(event, ToolCall):
                    calls.append(bounded_call(event))  # too large: answered with an error
                elif isinstance(event, Usage):
                    usage = usage + event
        except (LoomError, asyncio.CancelledError):
            raise
        except Exception as exc:
            raise ModelError(f"{deps.model.name} failed: {type(exc).__name__}: {exc}") from exc
        finally:  # a cancelled run releases the provider's response now, not at garbage collection
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        parts: list[Any] = [TextPart("".join(text))] if text else []
        return Message("assistant", parts + calls, usage=usage, model=deps.model.name)

    async def _run_calls(self, calls: Sequence[ToolCall]) -> bool:
        """Run the calls that need no approval; save the rest as pending. True if any wait."""
        results: dict[str, ToolResult] = {}
        runnable: list[tuple[ToolCall, Tool]] = []
        pending: list[PendingApproval] = []
        for call in calls:
            checked = self._check(call)
            if isinstance(checked, ToolResult):
                results[call.id] = checked
            elif checked.requires_approval(call.arguments or {}):
                waiting = await self._pending(call, checked)
                if isinstance(waiting, ToolResult):  # its preview found it cannot work
                    results[call.id] = waiting
                else:
                    pending.append(waiting)
            else:
                runnable.append((call, checked))
        outcomes = await asyncio.gather(*(self._invoke(c, t) for c, t in runnable))
        results.update({r.call_id: r for r in outcomes})
        if results:
            ordered = [results[c.id] for c in calls if c.id in results]
            await self.add(Message("tool", list(ordered)))
        if pending:
            self.thread.pending = pending
            self.save()
            await self.emit(ApprovalRequested(pending, self.thread.id))
            return True
        return False

    def _check(self, call: ToolCall) -> Tool | ToolResult:
        tool = self.deps.tools.get(call.name)
        if tool is None:
            return _error(
                call,
                f"There is no tool named {call.name!r}. Available tools: "
                f"{', '.join(sorted(self.deps.tools)) or 'none'}.",
            )
        if call.arguments is None:
            return _error(call, unusable_arguments(call))
        try:
            tool.validate(call.arguments)
        except ToolInputError as exc:
            return _error(call, f"Invalid arguments for {call.name!r}: {exc}")
        return tool

    async def _pending(self, call: ToolCall, tool: Tool) -> PendingApproval | ToolResult:
        preview = await tool.make_preview(call.arguments or {}, self.ctx)
        if isinstance(preview, ToolOutput) and preview.is_error:
            return _result(call, preview)
        return PendingApproval(call.id, call.name, call.arguments or {}, preview)

    async def _invoke(
        self, call: ToolCall, tool: Tool, approval: Any = None, preview: Any = None
    ) -> ToolResult:
        # An approved call sees its card, so the tool can refuse to do more than it showed.
        ctx = (
            self.ctx
            if approval is None
            else dataclasses.replace(self.ctx, approved_preview=preview)
        )
        try:
            output = await tool.call(call.arguments or {}, ctx)
        except ToolInputError as exc:
            return _error(call, f"Invalid arguments for {call.name!r}: {exc}")
        except Exception as exc:
            return _error(call, f"{type(exc).__name__}: {exc}")
        return _result(call, output, approval)

    async def _finish_approvals(self) -> None:
        pending = self.thread.pending
        tools = self.deps.tools
        runs = []
        for p in pending:
            call = ToolCall(p.call_id, p.tool, p.arguments)
            if p.decision and p.tool in tools:
                runs.append(self._invoke(call, tools[p.tool], "approved", p.preview))
            else:
                runs.append(_rejected(call))
        results = await asyncio.gather(*runs)
        self.thread.pending = []
        await self.add(Message("tool", list(results)))
        self.save()

    async def _close_dangling_calls(self) -> None:
        """Calls left without a result (an interrupted run) get one, so the model can go on.

        Only the messages since the last user message are read: each run starts here, so the
        calls before its user message have results, and a turn costs the same on a long thread.
        """
        since = _since_last_user(self.thread.messages)
        answered = {r.call_id for m in since for r in m.tool_results}
        dangling = [c for m in since for c in m.tool_calls if c.id not in answered]
        if dangling:
            await self.add(
                Message(
                    "tool",
                    [_error(c, "This call was interrupted before it finished.") for c in dangling],
                )
            )


def _since_last_user(messages: list[Message]) -> list[Message]:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user":
            return messages[i + 1 :]
    return messages


async def _rejected(call: ToolCall) -> ToolResult:
    result = _error(call, REJECTED)
    result.approval = "rejected"
    return result


def _result(call: ToolCall, output: ToolOutput, approval: Any = None) -> ToolResult:
    content = output.content or ""
    if output.is_error and not content.startswith("{"):
        content = json.dumps({"error": content})
    data = output.data
    if isinstance(data, (dict, list, tuple)) and size_problem(data, depth_only=True):
        data = None  # the model got the content; data this deep could not be saved
    return ToolResult(call.id, call.name, content, data, output.is_error, approval, output.chart)


def _error(call: ToolCall, message: str) -> ToolResult:
    return ToolResult(call.id, call.name, json.dumps({"error": message}), is_error=True)
