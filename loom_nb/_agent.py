"""Agents: definition, runs and resumes, and the threads they keep.

A run ends in one of three states and never waits for a person: ``complete``,
``awaiting_approval`` (the pending calls are saved in the thread; ``resume`` continues), or
``error`` (raised as :class:`RunError` by ``run``; what completed stays saved).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from loom_nb import _loop_thread
from loom_nb._codec import is_dataframe
from loom_nb._errors import RunError, ThreadNotFound, UserError
from loom_nb._events import EventHandler
from loom_nb._kept_threads import KeptThreads
from loom_nb._messages import (
    Message,
    PendingApproval,
    RunStatus,
    Thread,
    ThreadInfo,
    Usage,
    new_thread_id,
)
from loom_nb._run import Run, RunDeps
from loom_nb._store import Store, store_from_env
from loom_nb._tools import Connector, Tool, collect_tools, duplicate_tool_error
from loom_nb.models import Model, ModelSettings, resolve_model
from loom_nb.models._deadlines import check_settings

if TYPE_CHECKING:
    from loom_nb.charts._chart import Chart

__all__ = ["Agent", "Decision", "RunResult", "define_agent"]


@dataclass
class Decision:
    """The user's answer to one pending call. ``digest`` (from the card that was shown) makes
    the decision bind to exactly those arguments."""

    approve: bool
    digest: str | None = None


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
        """The id of the thread the run went on, to continue it later."""
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
        """The calls waiting for approval (empty unless ``status == "awaiting_approval"``)."""
        return self.thread.pending

    @property
    def usage(self) -> Usage:
        """Tokens and requests of this run's model turns, added up."""
        total = Usage()
        for m in self.new_messages:
            if m.usage is not None:
                total = total + m.usage
        return total

    @property
    def frames(self) -> list[Any]:
        """DataFrames fetched in this run, oldest first (``thread.frames`` has all)."""
        return [r.data for m in self.new_messages for r in m.tool_results if is_dataframe(r.data)]

    @property
    def charts(self) -> list[Chart]:
        """Charts drawn in this run, oldest first (``thread.charts`` has all)."""
        from loom_nb.charts import Chart

        results = (r for m in self.new_messages for r in m.tool_results)
        return [Chart(r.chart) for r in results if r.chart is not None]


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
        self._kept = KeptThreads(store)

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
            thread = self._load_for_run(thread_id, user_id)
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
        thread = self._load_for_run(thread_id, self._user_id(context))
        by_id = {p.call_id: p for p in thread.pending}
        if not by_id:
            raise UserError(f"thread {thread_id} has no call waiting for approval")
        chosen: dict[str, bool] = {}  # all checked before any is set on the (kept) thread
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
            chosen[call_id] = decision.approve
        for call_id, approve in chosen.items():
            by_id[call_id].decision = approve
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
        return _loop_thread.run_sync(
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
        return _loop_thread.run_sync(
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
        """This agent's threads with a message containing ``text`` (case-insensitive), newest
        first."""
        return self.store.search(text, agent=self.name, user_id=self._user_id(context), limit=limit)

    def delete_thread(self, thread_id: str, *, context: Mapping[str, Any] | None = None) -> None:
        """Delete a saved thread and its messages; :class:`ThreadNotFound` if not this user's."""
        self._load(thread_id, self._user_id(context))  # same "not found" for foreign threads
        self._kept.forget(thread_id)
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

    def _run_deps(self) -> RunDeps:
        # Taken per run, so a run sees the agent as it is when the run starts.
        return RunDeps(
            agent_name=self.name,
            model=self.model,
            instructions=self.instructions,
            tools=self.tools,
            store=self.store,
            settings=self.model_settings,
            max_steps=self.max_steps,
        )

    def _load(self, thread_id: str, user_id: str | None) -> Thread:
        thread = self.store.load(thread_id, user_id=user_id)
        if thread is None or thread.agent != self.name:
            raise ThreadNotFound(
                f"no thread {thread_id!r} for agent {self.name!r}; "
                "list saved threads with agent.threads()"
            )
        return thread

    def _load_for_run(self, thread_id: str, user_id: str | None) -> Thread:
        """The thread a run goes on: kept from this agent's last run on it while the store
        says it has not changed, else loaded."""
        if thread_id in self._running:  # before the kept thread is touched
            raise UserError(f"thread {thread_id} is already running; wait for that run to end")
        if self._kept.store is not self.store:
            self._kept = KeptThreads(self.store)
        thread = self._kept.load(thread_id, user_id)
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
        run = Run(self._run_deps(), thread, context, on_event)
        try:
            await run.execute(prompt)
        finally:
            self._running.discard(thread.id)
            with contextlib.suppress(Exception):  # a store that fails here fails the next load
                self._kept.keep(thread)
        # The result's thread is a snapshot: the kept one goes on with the next run.
        snapshot = dataclasses.replace(
            thread, messages=list(thread.messages), pending=list(thread.pending)
        )
        result = RunResult(thread.status, snapshot, run.new_messages, thread.error)
        if result.status == "error":
            error = run.failure or RunError(thread.error or "the run failed")
            error.result = result
            raise error
        return result


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

    ``store`` defaults to the one named by ``LOOM_STORE`` (a SQLite path or a ``postgresql://``
    URL), else ``sqlite_store()`` at ``.loom/loom.db``: threads survive a kernel restart.
    ``auth(context) -> user_id`` scopes threads to users.
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
        store = store_from_env()
    elif not isinstance(store, Store):
        raise UserError(
            f"store={store!r} is not a store: use memory_store() or loom_nb.sqlite.sqlite_store()"
        )
    if auth is not None and not callable(auth):
        raise UserError("auth must be a function auth(context) -> user id")
    if model_settings is not None:
        check_settings(model_settings)
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
