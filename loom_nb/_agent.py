"""Agents: definition, runs and resumes, and the threads they keep.

A run ends in one of three states and never waits for a person: ``complete``,
``awaiting_approval`` (the pending calls are saved in the thread; ``resume`` continues), or
``error`` (raised as :class:`RunError` by ``run``; what completed stays saved).

Every run holds its thread's lease (``_lease``): one run per thread at a time, across kernels.
A decision is saved by compare-and-set before the run that carries it out takes the lease, so
of any number of kernels deciding one call exactly one wins; the others get
:class:`CallAlreadyDecided`.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loom_nb import _loop_thread
from loom_nb._chart import Chart
from loom_nb._codec import is_dataframe
from loom_nb._errors import (
    CallAlreadyDecided,
    RunError,
    ThreadBusy,
    ThreadNotFound,
    ThreadWaiting,
    UserError,
)
from loom_nb._events import EventHandler
from loom_nb._kept_threads import KeptThreads
from loom_nb._lease import ThreadLease, settle
from loom_nb._messages import (
    Message,
    PendingApproval,
    Resolution,
    RunStatus,
    Thread,
    ThreadInfo,
    Usage,
    new_thread_id,
)
from loom_nb._run import Run, RunDeps
from loom_nb._store import Store, store_from_env
from loom_nb._tools import Connector, Tool, ToolsArg, collect_tools, duplicate_tool_error
from loom_nb.models import Model, ModelSettings, check_model_settings, resolve_model

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
        results = (r for m in self.new_messages for r in m.tool_results)
        return [Chart(r.chart) for r in results if r.chart is not None]


AuthHook = Callable[[Mapping[str, Any]], str | None]

#: What ``resume`` takes per call id: approve (True) or reject (False) a pending call, bound
#: to its digest with a :class:`Decision`; for a call whose outcome is unknown, a Resolution.
DecisionLike = bool | Decision | Resolution

_RESOLUTIONS = ("happened", "retry", "failed")


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
        interrupt_wait: float = 5.0,
    ) -> None:
        self.name = name
        self.model = model
        self.instructions = instructions
        self.tools = tools
        self.store = store
        self.auth = auth
        self.max_steps = max_steps
        self.model_settings = model_settings
        #: Seconds Ctrl-C waits for a running approved write to finish (its result is then
        #: saved) before recording its outcome as unknown.
        self.interrupt_wait = interrupt_wait
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
            self.store.save_thread(thread)
            thread_id = thread.id
        elif not self._keeps(thread_id):  # one it has not run: refused before taking a lease
            _refuse_waiting(self._load_for_run(thread_id, user_id))
        # A thread it keeps (one check_thread just read) is checked once, under its lease.
        return await self._drive(thread_id, context, on_event, prompt=prompt)

    async def resume(
        self,
        thread_id: str,
        decisions: Mapping[str, DecisionLike],
        *,
        context: Mapping[str, Any] | None = None,
        on_event: EventHandler | None = None,
    ) -> RunResult:
        """Decide calls by id and go on once none waits.

        A pending call takes True (approve) or False (reject), or a :class:`Decision` with
        the digest of the card that was shown. A call whose outcome is unknown (its process
        stopped while it ran) takes "happened", "retry" or "failed". Each decision is saved
        at once; a call decided elsewhere first raises :class:`CallAlreadyDecided`, and the
        run then waits for nothing from this call. ``{}`` goes on with what was decided.
        """
        user_id = self._user_id(context)
        thread = self._load_for_run(thread_id, user_id)
        by_id = {p.call_id: p for p in thread.pending}
        approvals: dict[str, bool] = {}
        resolutions: dict[str, Resolution] = {}
        for call_id, value in decisions.items():
            if call_id not in by_id:
                if any(c.id == call_id for m in thread.messages for c in m.tool_calls):
                    raise CallAlreadyDecided(call_id, "done")  # its result is saved
                raise UserError(
                    f"no pending call {call_id!r} in thread {thread_id}; pending: {sorted(by_id)}"
                )
            if isinstance(value, str):
                resolutions[call_id] = _resolution(by_id[call_id], value)
            else:
                approvals[call_id] = _approval(by_id[call_id], value)
        if not by_id:
            raise UserError(f"thread {thread_id} has no call waiting for approval")
        for approve in (True, False):
            ids = [c for c, a in approvals.items() if a is approve]
            if ids:
                state: Any = "approved" if approve else "rejected"
                self.store.update_calls(
                    thread.id, ids, state, expect={"pending"}, user_id=thread.user_id
                )
        if not resolutions:
            thread = self._load_for_run(thread_id, user_id)  # kept: the run starts from it
            if any(p.state == "pending" for p in thread.pending):
                return RunResult(thread.status, _snapshot(thread))  # the others still wait
        try:
            return await self._drive(thread.id, context, on_event, resolutions=resolutions)
        except ThreadBusy as exc:
            if not approvals:
                raise
            raise ThreadBusy(
                f"{exc}. Your decision is saved; go on after that run with "
                "agent.resume(thread_id, {})"
            ) from None

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
        decisions: Mapping[str, DecisionLike],
        *,
        context: Mapping[str, Any] | None = None,
        on_event: EventHandler | None = None,
    ) -> RunResult:
        """:meth:`resume` for scripts and notebook cells."""
        return _loop_thread.run_sync(
            self.resume(thread_id, decisions, context=context, on_event=on_event)
        )

    # ---- threads ----------------------------------------------------------------------------

    def check_thread(self, thread_id: str, *, context: Mapping[str, Any] | None = None) -> None:
        """Raise what a new prompt on ``thread_id`` meets now: :class:`ThreadNotFound` if it is
        not this user's, :class:`ThreadWaiting` while one of its calls waits. One cheap read
        while the agent keeps the thread (a notebook cell checks before it shows a view)."""
        _refuse_waiting(self._load_for_run(thread_id, self._user_id(context)))

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

    def export(
        self, thread_id: str, path: str | Path, *, context: Mapping[str, Any] | None = None
    ) -> Path:
        """Write thread ``thread_id`` as a notebook that redoes it without the agent: the
        conversation as markdown, each tool call as the code that reproduces its result
        (``.ipynb``, a jupytext ``.py`` script, or ``.md``, by the suffix of ``path``).
        Returns the path written. Needs the ``jupyter`` extra (nbformat, jupytext)."""
        from loom_nb._export import export_thread

        return export_thread(self.thread(thread_id, context=context), self.tools, path)

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
            interrupt_wait=self.interrupt_wait,
        )

    def _load(self, thread_id: str, user_id: str | None) -> Thread:
        thread = self.store.load(thread_id, user_id=user_id)
        if thread is None or thread.agent != self.name:
            raise self._not_found(thread_id)
        return settle(thread)

    def _keeps(self, thread_id: str) -> bool:
        return self._kept.store is self.store and thread_id in self._kept

    def _not_found(self, thread_id: str) -> ThreadNotFound:
        return ThreadNotFound(
            f"no thread {thread_id!r} for agent {self.name!r}; "
            "list saved threads with agent.threads()"
        )

    def _load_for_run(self, thread_id: str, user_id: str | None) -> Thread:
        """:meth:`_load` for a run: the thread kept from this agent's last run on it while the
        store says nothing changed since (one cheap read), else loaded."""
        if self._kept.store is not self.store:
            self._kept = KeptThreads(self.store)
        thread = self._kept.load(thread_id, user_id)
        if thread is None or thread.agent != self.name:
            raise self._not_found(thread_id)
        return settle(thread)

    async def _drive(
        self,
        thread_id: str,
        context: Mapping[str, Any] | None,
        on_event: EventHandler | None,
        *,
        prompt: str | None = None,
        resolutions: Mapping[str, Resolution] | None = None,
    ) -> RunResult:
        try:
            lease = await ThreadLease.acquire(self.store, thread_id, self._user_id(context))
        except KeyError:  # the stores' word for a thread they never saved (or another user's)
            raise self._not_found(thread_id) from None
        thread: Thread | None = None
        try:
            # the one load of a run: no other run can change the thread now
            thread = self._load_for_run(thread_id, self._user_id(context))
            if prompt is not None:
                _refuse_waiting(thread)
            run = Run(self._run_deps(), thread, context, on_event, lease)
            await run.execute(prompt, resolutions)
        finally:
            lease.release(error=thread.error if thread is not None else None)
            if thread is not None:
                thread.lease = None  # this run freed it (or lost it, when it stopped for that)
                with contextlib.suppress(Exception):  # a failing store fails the next load
                    self._kept.keep(thread)
        # The result's thread is a snapshot: the kept one goes on with the next run.
        result = RunResult(thread.status, _snapshot(thread), run.new_messages, thread.error)
        if result.status == "error":
            error = run.failure or RunError(thread.error or "the run failed")
            error.result = result
            raise error
        return result


def _snapshot(thread: Thread) -> Thread:
    """A kept thread as it is now, for a result (the kept one goes on with the next run)."""
    return dataclasses.replace(
        thread, messages=list(thread.messages), pending=[copy.copy(p) for p in thread.pending]
    )


def _refuse_waiting(thread: Thread) -> None:
    """A new prompt waits until every call of the thread is settled."""
    unknown = [p for p in thread.pending if p.state == "unknown"]
    waiting = unknown + [p for p in thread.pending if p.state != "unknown"]
    if unknown:
        p = unknown[0]
        raise ThreadWaiting(
            f"thread {thread.id}: the outcome of {p.tool} (call {p.call_id}) is unknown: its "
            "kernel stopped while it ran, so the write may have happened. Check, then choose: "
            f"agent.resume(thread_id, {{{p.call_id!r}: 'happened' | 'retry' | 'failed'}})",
            thread_id=thread.id,
            waiting=waiting,
        )
    if thread.pending:
        raise ThreadWaiting(
            f"thread {thread.id} waits for approval of "
            f"{', '.join(p.tool for p in thread.pending)}: approve or reject first with "
            "agent.resume(thread_id, {call_id: True/False})",
            thread_id=thread.id,
            waiting=waiting,
        )


def _approval(p: PendingApproval, value: bool | Decision) -> bool:
    decision = value if isinstance(value, Decision) else Decision(bool(value))
    if p.state == "unknown":
        raise UserError(
            f"the outcome of call {p.call_id} ({p.tool}) is unknown: its kernel stopped while "
            "it ran, so it may have written. Approve / Reject no longer apply; choose "
            "'happened', 'retry' or 'failed'"
        )
    if p.state != "pending":
        raise CallAlreadyDecided(p.call_id, p.state)
    if decision.digest is not None and decision.digest != p.digest:
        raise UserError(
            f"the arguments of call {p.call_id!r} are not the ones that were shown; "
            "nothing was run. Review the call again before deciding"
        )
    return decision.approve


def _resolution(p: PendingApproval, value: str) -> Resolution:
    if value not in _RESOLUTIONS:
        raise UserError(
            f"{value!r} is not a choice for call {p.call_id}: pass True / False to approve or "
            "reject, or for a call whose outcome is unknown 'happened', 'retry' or 'failed'"
        )
    if p.state == "pending":
        raise UserError(
            f"call {p.call_id} ({p.tool}) waits for approval, nothing ran: pass True (approve) "
            "or False (reject)"
        )
    if p.state != "unknown":
        raise CallAlreadyDecided(p.call_id, p.state)
    return value  # type: ignore[return-value]


def _title(prompt: str) -> str:
    line = prompt.strip().splitlines()[0]
    return line if len(line) <= 80 else line[:79] + "…"


def define_agent(
    *,
    name: str,
    model: Model | str,
    instructions: str | None = None,
    tools: ToolsArg | Tool | Callable[..., Any] = (),
    connectors: Sequence[Connector] | Connector = (),
    store: Store | None = None,
    auth: AuthHook | None = None,
    max_steps: int = 20,
    model_settings: ModelSettings | None = None,
    interrupt_wait: float = 5.0,
) -> Agent:
    """Define an agent. Every configuration mistake raises here, before any run.

    ``store`` defaults to the one named by ``LOOM_STORE`` (a SQLite path or a ``postgresql://``
    URL), else ``sqlite_store()`` at ``.loom/loom.db``: threads survive a kernel restart.
    ``auth(context) -> user_id`` scopes threads to users. ``interrupt_wait``: seconds Ctrl-C
    waits for an approved write that is running to finish, so that its result is saved; after
    that its outcome is recorded as unknown.
    """
    if not isinstance(name, str) or not name.strip():
        raise UserError(f"define_agent(name=...) needs a non-empty name, got {name!r}")
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
        raise UserError(
            f"define_agent(max_steps=...) takes a positive whole number of model turns "
            f"(default 20), got {max_steps!r}"
        )
    if instructions is not None and not isinstance(instructions, str):
        raise UserError(
            "define_agent(instructions=...) takes the text the model is told (a str), got "
            f"{type(instructions).__name__} {instructions!r}"
        )
    if (
        isinstance(interrupt_wait, bool)
        or not isinstance(interrupt_wait, int | float)
        or (interrupt_wait < 0)
    ):
        raise UserError(
            f"define_agent(interrupt_wait=...) is in seconds, 0 or more; got {interrupt_wait!r}"
        )
    all_tools: dict[str, Tool] = {}
    origin: dict[str, str] = {}
    sources: list[tuple[str, dict[str, Tool]]] = [
        ("the agent's tools", collect_tools(tools, "the agent's tools", "define_agent(tools=...)"))
    ]
    if isinstance(connectors, Connector):  # one connector where a list is expected
        connectors = [connectors]
    if isinstance(connectors, str) or not isinstance(connectors, Sequence):
        raise UserError(
            "define_agent(connectors=...) takes a list of connectors made with connector(...), "
            f"frame_tools(...) or supabase_tools(...), got {type(connectors).__name__}"
        )
    for i, c in enumerate(connectors):
        if not isinstance(c, Connector):
            raise UserError(
                f"connectors=[...] takes connectors made with connector(...), frame_tools(...) "
                f"or supabase_tools(...), but connectors[{i}] is {type(c).__name__}"
                + ("; a tool or a function goes in tools=[...]" if callable(c) else "")
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
    return Agent(
        name=name,
        model=resolve_model(model),
        instructions=instructions,
        tools=all_tools,
        store=store,
        auth=auth,
        max_steps=max_steps,
        model_settings=check_model_settings(model_settings),
        interrupt_wait=float(interrupt_wait),
    )
