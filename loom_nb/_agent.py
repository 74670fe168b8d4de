"""Agents and the agent loop: model turn, tool calls, tool results, approvals, saving.

A run ends in one of three states and never waits for a person: ``complete``,
``awaiting_approval`` (the pending calls are saved in the thread; ``resume`` continues), or
``error`` (raised as :class:`RunError` by ``run``; what completed stays saved).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from loom_nb import _runner
from loom_nb._context import RunContext
from loom_nb._errors import (
    LoomError,
    ModelError,
    RunError,
    StepLimitExceeded,
    ThreadNotFound,
    UserError,
)
from loom_nb._messages import (
    Message,
    PendingApproval,
    RunStatus,
    TextPart,
    Thread,
    ThreadInfo,
    ToolCall,
    ToolResult,
    Usage,
    new_thread_id,
    now,
)
from loom_nb._store import MemoryStore, Store
from loom_nb._tools import (
    Connector,
    Tool,
    ToolInputError,
    collect_tools,
    duplicate_tool_error,
)
from loom_nb.models import (
    Model,
    ModelRequest,
    ModelSettings,
    TextDelta,
    ToolDefinition,
    resolve_model,
)

REJECTED = "The user rejected this call; nothing was run or written."


@dataclass
class Decision:
    """The user's answer to one pending call. ``digest`` (from the card that was shown) makes
    the decision bind to exactly those arguments."""

    approve: bool
    digest: str | None = None


@dataclass
class MessageAdded:
    """A message completed and was saved."""

    message: Message
    #: The thread it was saved in (known before the run returns, e.g. for a new thread).
    thread_id: str | None = None


@dataclass
class ApprovalRequested:
    """The run stopped: these calls wait for Approve / Reject."""

    pending: list[PendingApproval]
    thread_id: str | None = None


#: What ``on_event`` receives while a run streams.
RunEvent = TextDelta | MessageAdded | ApprovalRequested
EventHandler = Callable[[RunEvent], Awaitable[None] | None]


@dataclass
class RunResult:
    """How a run ended, with the whole thread."""

    status: RunStatus
    thread: Thread
    #: Messages added by this run.
    new_messages: list[Message] = field(default_factory=list)
    error: str | None = None

    @property
    def thread_id(self) -> str:
        return self.thread.id

    @property
    def output(self) -> str:
        """The last text the assistant wrote in this run."""
        for m in reversed(self.new_messages):
            if m.role == "assistant" and m.text:
                return m.text
        return ""

    @property
    def pending(self) -> list[PendingApproval]:
        return self.thread.pending

    @property
    def usage(self) -> Usage:
        total = Usage()
        for m in self.new_messages:
            if m.usage is not None:
                total = total + m.usage
        return total

    @property
    def frames(self) -> list[Any]:
        """DataFrames fetched in this run, oldest first (``thread.frames`` has all)."""
        from loom_nb._codec import is_dataframe

        return [r.data for m in self.new_messages for r in m.tool_results if is_dataframe(r.data)]


AuthHook = Callable[[Mapping[str, Any]], str | None]


class Agent:
    """An agent: a model, instructions, tools, and a store. Build one with :func:`define_agent`."""

    def __init__(
        self,
        *,
        name: str,
        model: Model,
        instructions: str | None,
        tools: dict[str, Tool],
        store: Store,
        auth: AuthHook | None,
        max_steps: int,
        model_settings: ModelSettings,
    ) -> None:
        self.name = name
        self.model = model
        self.instructions = instructions
        self.tools = tools
        self.store = store
        self.auth = auth
        self.max_steps = max_steps
        self.model_settings = model_settings
        self._running: set[str] = set()

    def __repr__(self) -> str:
        return f"<Agent {self.name!r} model={self.model.name!r} tools={sorted(self.tools)}>"

    # ---- runs -------------------------------------------------------------------------------

    async def run(
        self,
        prompt: str,
        *,
        thread_id: str | None = None,
        context: Mapping[str, Any] | None = None,
        on_event: EventHandler | None = None,
    ) -> RunResult:
        """Send ``prompt`` in a new thread, or in ``thread_id`` to continue one."""
        if not isinstance(prompt, str) or not prompt.strip():
            raise UserError("the prompt is empty: pass the text to send to the agent")
        user_id = self._user_id(context)
        if thread_id is None:
            thread = Thread(id=new_thread_id(), agent=self.name, user_id=user_id)
            thread.title = _title(prompt)
        else:
            thread = self._load(thread_id, user_id)
            if thread.pending:
                raise UserError(
                    f"thread {thread.id} waits for approval of "
                    f"{', '.join(p.tool for p in thread.pending)}: approve or reject first with "
                    "agent.resume(thread_id, {call_id: True/False})"
                )
        return await self._drive(thread, context, on_event, prompt=prompt)

    async def resume(
        self,
        thread_id: str,
        decisions: Mapping[str, bool | Decision],
        *,
        context: Mapping[str, Any] | None = None,
        on_event: EventHandler | None = None,
    ) -> RunResult:
        """Approve (True) or reject (False) pending calls by call id, and go on once all are
        decided."""
        thread = self._load(thread_id, self._user_id(context))
        by_id = {p.call_id: p for p in thread.pending}
        if not by_id:
            raise UserError(f"thread {thread_id} has no call waiting for approval")
        for call_id, value in decisions.items():
            decision = value if isinstance(value, Decision) else Decision(bool(value))
            if call_id not in by_id:
                raise UserError(
                    f"no pending call {call_id!r} in thread {thread_id}; pending: {sorted(by_id)}"
                )
            if decision.digest is not None and decision.digest != by_id[call_id].digest:
                raise UserError(
                    f"the arguments of call {call_id!r} are not the ones that were shown; "
                    "nothing was run. Review the call again before deciding"
                )
            by_id[call_id].decision = decision.approve
        return await self._drive(thread, context, on_event, prompt=None)

    def run_sync(
        self,
        prompt: str,
        *,
        thread_id: str | None = None,
        context: Mapping[str, Any] | None = None,
        on_event: EventHandler | None = None,
    ) -> RunResult:
        """:meth:`run` for scripts and notebook cells (works inside Jupyter's running loop)."""
        return _runner.run_sync(
            self.run(prompt, thread_id=thread_id, context=context, on_event=on_event)
        )

    def resume_sync(
        self,
        thread_id: str,
        decisions: Mapping[str, bool | Decision],
        *,
        context: Mapping[str, Any] | None = None,
        on_event: EventHandler | None = None,
    ) -> RunResult:
        """:meth:`resume` for scripts and notebook cells."""
        return _runner.run_sync(
            self.resume(thread_id, decisions, context=context, on_event=on_event)
        )

    # ---- threads ----------------------------------------------------------------------------

    def thread(self, thread_id: str, *, context: Mapping[str, Any] | None = None) -> Thread:
        """Load a saved thread; :class:`ThreadNotFound` if it is not this user's."""
        return self._load(thread_id, self._user_id(context))

    def threads(
        self, *, context: Mapping[str, Any] | None = None, limit: int = 50, offset: int = 0
    ) -> list[ThreadInfo]:
        """This agent's threads (this user's, with ``auth``), most recent first."""
        return self.store.list(
            agent=self.name, user_id=self._user_id(context), limit=limit, offset=offset
        )

    def search(
        self, text: str, *, context: Mapping[str, Any] | None = None, limit: int = 50
    ) -> list[ThreadInfo]:
        return self.store.search(text, agent=self.name, user_id=self._user_id(context), limit=limit)

    def delete_thread(self, thread_id: str, *, context: Mapping[str, Any] | None = None) -> None:
        self._load(thread_id, self._user_id(context))  # same "not found" for foreign threads
        self.store.delete(thread_id, user_id=self._user_id(context))

    # ---- machinery --------------------------------------------------------------------------

    def _user_id(self, context: Mapping[str, Any] | None) -> str | None:
        if self.auth is None:
            return None
        user_id = self.auth(context or {})
        if not user_id:
            raise UserError(
                f"agent {self.name!r} has an auth hook and it returned no user for this context; "
                "pass the signed-in user's details in context=..."
            )
        return str(user_id)

    def _load(self, thread_id: str, user_id: str | None) -> Thread:
        thread = self.store.load(thread_id, user_id=user_id)
        if thread is None or thread.agent != self.name:
            raise ThreadNotFound(
                f"no thread {thread_id!r} for agent {self.name!r}; "
                "list saved threads with agent.threads()"
            )
        return thread

    async def _drive(
        self,
        thread: Thread,
        context: Mapping[str, Any] | None,
        on_event: EventHandler | None,
        *,
        prompt: str | None,
    ) -> RunResult:
        if thread.id in self._running:
            raise UserError(f"thread {thread.id} is already running; wait for that run to end")
        self._running.add(thread.id)
        run = _Run(self, thread, context, on_event)
        try:
            await run.execute(prompt)
        finally:
            self._running.discard(thread.id)
        result = RunResult(thread.status, thread, run.new_messages, thread.error)
        if result.status == "error":
            error = run.failure or RunError(thread.error or "the run failed")
            error.result = result
            raise error
        return result


class _Run:
    """One run of the loop over one thread."""

    def __init__(
        self,
        agent: Agent,
        thread: Thread,
        context: Mapping[str, Any] | None,
        on_event: EventHandler | None,
    ) -> None:
        self.agent = agent
        self.thread = thread
        self.store = agent.store
        self.on_event = on_event
        self.ctx = RunContext(agent.name, thread.id, thread.user_id, dict(context or {}))
        self.new_messages: list[Message] = []
        self.failure: RunError | None = None

    async def emit(self, event: RunEvent) -> None:
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
        self.thread.updated_at = now()
        self.store.save_thread(self.thread)

    async def execute(self, prompt: str | None) -> None:
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
        for _ in range(self.agent.max_steps):
            message = await self._model_turn()
            await self.add(message)
            calls = message.tool_calls
            if not calls:
                self.save()
                return
            if await self._run_calls(calls):
                return  # stopped for approval
        raise StepLimitExceeded(
            f"the agent made {self.agent.max_steps} model turns without finishing; "
            "raise define_agent(max_steps=...) or ask a narrower question"
        )

    async def _model_turn(self) -> Message:
        agent = self.agent
        request = ModelRequest(
            instructions=agent.instructions,
            messages=list(self.thread.messages),
            tools=[
                ToolDefinition(t.name or n, t.description, t.parameters)
                for n, t in agent.tools.items()
            ],
            settings=agent.model_settings,
        )
        text: list[str] = []
        calls: list[ToolCall] = []
        usage = Usage()
        try:
            async for event in agent.model.stream(request):
                if isinstance(event, TextDelta):
                    text.append(event.text)
                    await self.emit(event)
                elif isinstance(event, ToolCall):
                    calls.append(event)
                elif isinstance(event, Usage):
                    usage = usage + event
        except (LoomError, asyncio.CancelledError):
            raise
        except Exception as exc:
            raise ModelError(f"{agent.model.name} failed: {type(exc).__name__}: {exc}") from exc
        parts: list[Any] = [TextPart("".join(text))] if text else []
        return Message("assistant", parts + calls, usage=usage, model=agent.model.name)

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
                pending.append(self._pending(call, checked))
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
        tool = self.agent.tools.get(call.name)
        if tool is None:
            return _error(
                call,
                f"There is no tool named {call.name!r}. Available tools: "
                f"{', '.join(sorted(self.agent.tools)) or 'none'}.",
            )
        if call.arguments is None:
            return _error(
                call,
                f"The arguments for {call.name!r} are not a JSON object: "
                f"{(call.raw_arguments or '')[:200]!r}. Send a JSON object.",
            )
        try:
            tool.validate(call.arguments)
        except ToolInputError as exc:
            return _error(call, f"Invalid arguments for {call.name!r}: {exc}")
        return tool

    def _pending(self, call: ToolCall, tool: Tool) -> PendingApproval:
        preview = None
        if tool.preview is not None:
            try:
                preview = tool.preview(call.arguments or {})
            except Exception as exc:  # a broken preview must not hide the call from the user
                preview = {"error": f"no preview: {exc}"}
        return PendingApproval(call.id, call.name, call.arguments or {}, preview)

    async def _invoke(self, call: ToolCall, tool: Tool, approval: Any = None) -> ToolResult:
        try:
            output = await tool.call(call.arguments or {}, self.ctx)
        except ToolInputError as exc:
            return _error(call, f"Invalid arguments for {call.name!r}: {exc}")
        except Exception as exc:
            return _error(call, f"{type(exc).__name__}: {exc}")
        content = output.content or ""
        if output.is_error and not content.startswith("{"):
            content = json.dumps({"error": content})
        return ToolResult(call.id, call.name, content, output.data, output.is_error, approval)

    async def _finish_approvals(self) -> None:
        pending = self.thread.pending
        tools = self.agent.tools
        runs = []
        for p in pending:
            call = ToolCall(p.call_id, p.tool, p.arguments)
            if p.decision and p.tool in tools:
                runs.append(self._invoke(call, tools[p.tool], "approved"))
            else:
                runs.append(_rejected(call))
        results = await asyncio.gather(*runs)
        self.thread.pending = []
        await self.add(Message("tool", list(results)))
        self.save()

    async def _close_dangling_calls(self) -> None:
        """Calls left without a result (an interrupted run) get one, so the model can go on."""
        answered = {r.call_id for r in self.thread.tool_results()}
        dangling = [c for m in self.thread.messages for c in m.tool_calls if c.id not in answered]
        if dangling:
            await self.add(
                Message(
                    "tool",
                    [_error(c, "This call was interrupted before it finished.") for c in dangling],
                )
            )


async def _rejected(call: ToolCall) -> ToolResult:
    result = _error(call, REJECTED)
    result.approval = "rejected"
    return result


def _error(call: ToolCall, message: str) -> ToolResult:
    return ToolResult(call.id, call.name, json.dumps({"error": message}), is_error=True)


def _title(prompt: str) -> str:
    line = prompt.strip().splitlines()[0]
    return line if len(line) <= 80 else line[:79] + "…"


def define_agent(
    *,
    name: str,
    model: Model | str,
    instructions: str | None = None,
    tools: Sequence[Tool | Callable[..., Any]] | Mapping[str, Tool | Callable[..., Any]] = (),
    connectors: Sequence[Connector] = (),
    store: Store | None = None,
    auth: AuthHook | None = None,
    max_steps: int = 20,
    model_settings: ModelSettings | None = None,
) -> Agent:
    """Define an agent. Every configuration mistake raises here, before any run.

    ``store`` defaults to an in-memory store; pass ``loom_nb.sqlite.sqlite_store()`` to keep
    threads across kernel restarts. ``auth(context) -> user_id`` scopes threads to users.
    """
    if not isinstance(name, str) or not name.strip():
        raise UserError("define_agent(name=...) needs a non-empty name")
    if not isinstance(max_steps, int) or max_steps < 1:
        raise UserError(f"max_steps must be a positive int, got {max_steps!r}")
    all_tools: dict[str, Tool] = {}
    origin: dict[str, str] = {}
    sources: list[tuple[str, dict[str, Tool]]] = [
        ("the agent's tools", collect_tools(tools, "the agent's tools"))
    ]
    for c in connectors:
        if not isinstance(c, Connector):
            raise UserError(
                "connectors=[...] takes connectors made with connector(...) or "
                f"supabase_tools(...), got {type(c).__name__}"
            )
        sources.append((f"connector {c.name!r}", c.tools))
    for where, found in sources:
        for tool_name, t in found.items():
            if tool_name in all_tools:
                raise duplicate_tool_error(tool_name, origin[tool_name], where)
            all_tools[tool_name] = t
            origin[tool_name] = where
    if store is None:
        store = MemoryStore()
    elif not isinstance(store, Store):
        raise UserError(
            f"store={store!r} is not a store: use memory_store() or loom_nb.sqlite.sqlite_store()"
        )
    if auth is not None and not callable(auth):
        raise UserError("auth must be a function auth(context) -> user id")
    return Agent(
        name=name,
        model=resolve_model(model),
        instructions=instructions,
        tools=all_tools,
        store=store,
        auth=auth,
        max_steps=max_steps,
        model_settings=model_settings or ModelSettings(),
    )
