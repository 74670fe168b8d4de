"""Agents: definition, runs and resumes, and the threads they keep.

A run ends in one of three states and never waits for a person: ``complete``,
``awaiting_approval`` (the pending calls are saved in the thread; ``resume`` continues), or
``error`` (raised as :class:`RunError` by ``run``; what completed stays saved).

Every run holds its thread's lease (``_lease``): one run per thread at a time, across kernels.
A decision is saved by compare-and-set under the lease of the run that carries it out (an
approval and its claim in one transaction), so of any number of kernels deciding one call
exactly one wins; the others get :class:`CallAlreadyDecided`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loom_nb import _loop_thread
from loom_nb._ask import (
    ASK_USER,
    answer_result,
    ask_user_tool,
    checked_answer,
    declined_result,
    is_built_in,
    is_question,
)
from loom_nb._budget import Budget, Prices, check_budget, check_prices, cost_of
from loom_nb._chart import Chart
from loom_nb._codec import is_dataframe
from loom_nb._context import RunContext
from loom_nb._errors import (
    CallAlreadyDecided,
    RunError,
    StoreError,
    ThreadBusy,
    ThreadNotFound,
    ThreadWaiting,
    UserError,
    way_on,
)
from loom_nb._events import EventHandler
from loom_nb._history import RECALL
from loom_nb._kept_threads import KeptThreads
from loom_nb._lease import ThreadLease, settle
from loom_nb._messages import (
    NEWER,
    CallState,
    Message,
    PendingApproval,
    Resolution,
    RunStatus,
    Thread,
    ThreadInfo,
    ToolResult,
    Usage,
    is_pause_call,
    new_thread_id,
    shallow_copy,
)
from loom_nb._numbers import CHECK_NUMBERS, CHECK_TOOL, CheckNumbers
from loom_nb._rules import KERNEL, Rule, RuleKind, RuleStore, make_rule
from loom_nb._run import Run, RunDeps
from loom_nb._store import Store, leased_writes, store_from_env
from loom_nb._tools import (
    Connector,
    Tool,
    ToolOutput,
    ToolsArg,
    collect_tools,
    duplicate_tool_error,
)
from loom_nb.models import Model, ModelSettings, check_model_settings, resolve_model

if TYPE_CHECKING:
    from loom_nb._eval import EvalReport

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
        """Tokens, requests and cost of this run's model turns, added up (``cost`` None when
        a turn's price is unknown)."""
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
#: to its digest with a :class:`Decision`; for a call whose outcome is unknown, a Resolution;
#: for a question (``ask_user``), the answer's text (False declines it).
DecisionLike = bool | Decision | Resolution | str

_RESOLUTIONS = ("happened", "retry", "failed")

#: How long a decision waits for a run of the thread in another kernel that may be taking the
#: same calls (it then says they were decided there) before it gives up with ThreadBusy.
DECIDE_WAIT_SECONDS = 2.0


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
        budget: Budget | None = None,
        prices: Prices | None = None,
        check_numbers: CheckNumbers = "warn",
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
        #: Tokens / dollars a run or thread may use before it pauses (see ``define_agent``).
        self.budget = budget
        self.prices = prices
        #: What becomes of an answer's numbers in no result (see ``define_agent``).
        self.check_numbers: CheckNumbers = check_numbers
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
        budget: Mapping[str, float] | None = None,
    ) -> RunResult:
        """Send ``prompt`` in a new thread, or in ``thread_id`` to continue one. ``budget``
        is this run's, over the agent's key by key (see :func:`define_agent`)."""
        if not isinstance(prompt, str) or not prompt.strip():
            raise UserError("the prompt is empty: pass the text to send to the agent")
        own = check_budget(budget, "run")
        _check_priced(own, self.model.name, self.prices, "run")
        user_id = self._user_id(context)
        if thread_id is None:
            thread = Thread(id=new_thread_id(), agent=self.name, user_id=user_id)
            thread.title = _title(prompt)
            if leased_writes(self.store):  # made, held, by the run's first write
                return await self._drive(
                    thread.id, context, on_event, prompt=prompt, budget=own, new=thread
                )
            self.store.save_thread(thread)
            thread_id = thread.id
        elif not self._keeps(thread_id):  # one it has not run: refused before taking a lease
            _refuse_waiting(self._load_for_run(thread_id, user_id))
        # A thread it keeps (one check_thread just read) is checked once, under its lease.
        return await self._drive(thread_id, context, on_event, prompt=prompt, budget=own)

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
        run then waits for nothing from this call. ``{}`` goes on with what was decided; so
        does deciding a call again as it was decided (approved or rejected, but its kernel
        stopped before it ran).
        """
        user_id = self._user_id(context)
        thread = self._load_for_run(thread_id, user_id)
        _refuse_newer(thread)
        by_id = {p.call_id: p for p in thread.pending}
        approvals: dict[str, bool] = {}
        resolutions: dict[str, Resolution] = {}
        answers: dict[str, ToolResult] = {}
        for call_id, value in decisions.items():
            if call_id not in by_id:
                if any(c.id == call_id for m in thread.messages for c in m.tool_calls):
                    raise CallAlreadyDecided(call_id, "done")  # its result is saved
                raise UserError(
                    f"no pending call {call_id!r} in thread {thread_id}; pending: {sorted(by_id)}"
                )
            if is_question(by_id[call_id]):
                answers[call_id] = _answer(by_id[call_id], value)
            elif isinstance(value, str):
                resolutions[call_id] = _resolution(by_id[call_id], value)
            else:
                decided = _approval(by_id[call_id], value)
                if decided is not None:  # None: decided so already, it goes on as it is
                    approvals[call_id] = decided
        if not by_id:
            raise UserError(f"thread {thread_id} has no call waiting for approval")
        deciding = [*approvals, *answers]
        lease = await self._take_to_decide(thread_id, user_id, deciding) if deciding else None
        if lease is not None:
            try:
                goes_on = self._decide(
                    thread_id, user_id, approvals, bool(resolutions), lease, answers
                )
            except BaseException:
                lease.release(error=None)
                raise
            if not goes_on:
                lease.release(error=None)
                thread = self._load_for_run(thread_id, user_id)
                return RunResult(thread.status, _snapshot(thread))  # the others still wait
        elif not resolutions:
            thread = self._load_for_run(thread_id, user_id)  # kept: the run starts from it
            if any(p.state == "pending" for p in thread.pending):
                return RunResult(thread.status, _snapshot(thread))  # the others still wait
        return await self._drive(thread_id, context, on_event, resolutions=resolutions, lease=lease)

    async def _take_to_decide(
        self, thread_id: str, user_id: str | None, approvals: Sequence[str]
    ) -> ThreadLease:
        """The thread's lease, taken before deciding: a decision and the claim of the call it
        approves are then one transaction, so no kill leaves a call decided and unclaimed.
        While another run holds the thread, wait briefly: a run that just took these calls
        shows them decided (CallAlreadyDecided); after that, ThreadBusy, nothing decided."""
        deadline = time.monotonic() + DECIDE_WAIT_SECONDS
        while True:
            try:
                return await ThreadLease.acquire(self.store, thread_id, user_id)
            except ThreadBusy as busy:
                now = self._load(thread_id, user_id)
                states = {p.call_id: p.state for p in now.pending}
                for call_id in approvals:
                    if states.get(call_id, "done") != "pending":
                        raise CallAlreadyDecided(call_id, states.get(call_id, "done")) from None
                if time.monotonic() > deadline:
                    raise ThreadBusy(
                        f"{busy}. Nothing was decided: decide again once that run ends (reload "
                        "the thread for a fresh card: %loom show THREAD_ID)"
                    ) from None
                await asyncio.sleep(0.05)

    def _decide(
        self,
        thread_id: str,
        user_id: str | None,
        approvals: Mapping[str, bool],
        resolving: bool,
        lease: ThreadLease,
        answers: Mapping[str, ToolResult] | None = None,
    ) -> bool:
        """Save the decisions under the thread's lease: when no other call waits, approved
        calls are claimed by this run in the same transaction (pending -> running); answers
        are their questions' results (pending -> done, with them). False when another call
        still waits for the user."""
        answers = answers or {}
        if answers:
            try:
                self.store.update_calls(
                    thread_id,
                    list(answers),
                    "done",
                    expect={"pending"},
                    message=Message("tool", list(answers.values())),
                    user_id=user_id,
                )
            except StoreError as exc:
                raise type(exc)(
                    f"{exc}. Reload thread {thread_id} to see whether the answer was saved, "
                    "and answer again if not"
                ) from None
        thread = self._load_for_run(thread_id, user_id)
        others = [p for p in thread.pending if p.state == "pending" and p.call_id not in approvals]
        tool_of = {p.call_id: p.tool for p in thread.pending}
        claim = not others and not resolving
        moves: dict[CallState, list[str]] = {}
        for call_id, yes in approvals.items():
            runs = yes and claim and tool_of.get(call_id) in self.tools
            runs = runs and not is_pause_call(call_id)  # a pause runs no tool
            moves.setdefault("running" if runs else "approved" if yes else "rejected", []).append(
                call_id
            )
        for state, ids in moves.items():
            try:
                self.store.update_calls(
                    thread_id,
                    ids,
                    state,
                    expect={"pending"},
                    holder=lease.holder if state == "running" else None,
                    user_id=user_id,
                )
            except StoreError as exc:
                raise type(exc)(
                    f"{exc}. Nothing ran; reload thread {thread_id} to see whether the "
                    "decision was saved, and decide again if not"
                ) from None
        return not others

    def run_sync(
        self,
        prompt: str,
        *,
        thread_id: str | None = None,
        context: Mapping[str, Any] | None = None,
        on_event: EventHandler | None = None,
        budget: Mapping[str, float] | None = None,
    ) -> RunResult:
        """:meth:`run` for scripts and notebook cells (works inside Jupyter's running loop)."""
        return _loop_thread.run_sync(
            self.run(prompt, thread_id=thread_id, context=context, on_event=on_event, budget=budget)
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

    # ---- rules ------------------------------------------------------------------------------

    def allow(
        self,
        *,
        tool: str,
        table: str | None = None,
        columns: Sequence[str] | None = None,
        max_rows: int | None = None,
        where: str | None = None,
        scope: str = "thread",
        thread_id: str | None = None,
        until: Any = None,
        context: Mapping[str, Any] | None = None,
    ) -> Rule:
        """Approve later calls of ``tool`` by themselves when their effect is inside every
        bound given: the ``table``, the ``columns`` written, at most ``max_rows`` rows changed
        (as the call's card counts them; execution holds the call to its card), an update's
        filter being ``where`` in the card's words, condition by condition (``"status =
        'open'"``; a ``*`` lets in further ANDed conditions, ``"status = 'open'*"``, or stands
        for one value, ``"status = *"``). A table or column the tool's schema says it cannot
        write is refused here. ``scope``: ``"thread"`` (the thread ``thread_id``, in every
        kernel), ``"agent"`` (every thread of this agent, in this kernel), ``"until"`` (every
        thread, every kernel, until ``until``: a datetime, a timedelta or a finite number of
        seconds from now; ``until`` also ends the other scopes). Saved in the store; each call
        it approves reads ``approval == "rule"`` with ``rule`` its id."""
        return self._rule(
            "allow", tool, table, columns, max_rows, where, scope, thread_id, until, context
        )

    def deny(
        self,
        *,
        tool: str,
        table: str | None = None,
        columns: Sequence[str] | None = None,
        max_rows: int | None = None,
        where: str | None = None,
        scope: str = "thread",
        thread_id: str | None = None,
        until: Any = None,
        context: Mapping[str, Any] | None = None,
    ) -> Rule:
        """Reject later calls inside these bounds by themselves (as :meth:`allow` reads them);
        a deny wins over an allow. Nothing is written; the model is told it was rejected."""
        return self._rule(
            "deny", tool, table, columns, max_rows, where, scope, thread_id, until, context
        )

    def rules(
        self, *, thread_id: str | None = None, context: Mapping[str, Any] | None = None
    ) -> list[Rule]:
        """The rules in force now for this agent (this user's, with ``auth``), oldest first:
        those of ``thread_id`` and the agent-wide ones, or with no ``thread_id`` every one
        (a rule of ``scope="agent"`` only in the kernel that made it)."""
        found = self._rule_store().load_rules(self.name, user_id=self._user_id(context))
        if thread_id is not None:
            return [r for r in found if r.applies(thread_id)]
        return [r for r in found if r.applies(r.thread_id or "")]

    def _rule(
        self,
        kind: RuleKind,
        tool: str,
        table: str | None,
        columns: Sequence[str] | None,
        max_rows: int | None,
        where: str | None,
        scope: str,
        thread_id: str | None,
        until: Any,
        context: Mapping[str, Any] | None,
    ) -> Rule:
        store = self._rule_store()
        user_id = self._user_id(context)
        rule = make_rule(
            kind,
            self.name,
            self.tools,
            tool,
            table,
            columns,
            max_rows,
            where,
            scope,
            thread_id,
            until,
        )
        if rule.thread_id is not None:
            self._load(rule.thread_id, user_id)  # ThreadNotFound unless it is this user's
        rule.user_id = user_id
        rule.kernel = KERNEL
        store.save_rule(rule)
        rule._store = store
        return rule

    def _rule_store(self) -> RuleStore:
        if not isinstance(self.store, RuleStore):
            raise UserError(
                f"the store of agent {self.name!r} ({type(self.store).__name__}) keeps no "
                "rules (save_rule, load_rules, revoke_rule); use memory_store(), sqlite_store() "
                "or postgres_store()"
            )
        return self.store

    # ---- threads ----------------------------------------------------------------------------

    def check_thread(self, thread_id: str, *, context: Mapping[str, Any] | None = None) -> None:
        """Raise what a new prompt on ``thread_id`` meets now: :class:`ThreadNotFound` if it is
        not this user's, :class:`ThreadWaiting` while one of its calls waits. One cheap read
        while the agent keeps the thread (a notebook cell checks before it shows a view)."""
        _refuse_waiting(self._load_for_run(thread_id, self._user_id(context)))

    def thread(self, thread_id: str, *, context: Mapping[str, Any] | None = None) -> Thread:
        """Load a saved thread; :class:`ThreadNotFound` if it is not this user's."""
        return self._load(thread_id, self._user_id(context))

    def previews_now(
        self, thread: Thread, *, context: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """The preview each of ``thread``'s calls that waits for Approve / Reject would show
        if it were asked now, by call id: its tool's preview read again, so a card drawn
        after a restart shows the rows as they are now, not as they were when it was saved.
        A call whose tool is gone or has no preview, or whose preview fails now, is left
        out (its card keeps the saved preview). The decision still binds to the arguments'
        digest; a write that checks its card checks the one saved with the call."""
        waiting = [p for p in thread.pending if p.state == "pending" and p.tool in self.tools]
        if not waiting:
            return {}
        ctx = RunContext(self.name, thread.id, thread.user_id, dict(context or {}))

        async def read() -> dict[str, Any]:
            found: dict[str, Any] = {}
            for p in waiting:
                tool = self.tools[p.tool]
                if tool.preview is None:
                    continue
                value = await tool.make_preview(p.arguments, ctx)
                failed = isinstance(value, ToolOutput) or (
                    isinstance(value, dict) and set(value) == {"error"}
                )
                if not failed:
                    found[p.call_id] = value
            return found

        return _loop_thread.run_sync(read())

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
        from loom_nb import _codec
        from loom_nb._export import export_thread

        # The thread is loaded and dropped in the pause: its decoded frames are freed with it,
        # never walked by a collection after the export (a tenth of an export's time).
        # (No name holds it: a local would outlive the pause.)
        mark = self.check_numbers != "off"
        with _codec.collector_paused():
            return export_thread(
                self.thread(thread_id, context=context), self.tools, path, mark_numbers=mark
            )

    def delete_thread(self, thread_id: str, *, context: Mapping[str, Any] | None = None) -> None:
        """Delete a saved thread and its messages; :class:`ThreadNotFound` if not this user's."""
        self._load(thread_id, self._user_id(context))  # same "not found" for foreign threads
        self._kept.forget(thread_id)
        self.store.delete(thread_id, user_id=self._user_id(context))

    # ---- evals ------------------------------------------------------------------------------

    async def eval_async(
        self,
        threads: Sequence[str | Thread] | str | Thread | None = None,
        *,
        suite: str | None = None,
        model: Model | str | None = None,
        instructions: str | None = None,
        rel_tol: float = 1e-9,
        abs_tol: float = 0.0,
        context: Mapping[str, Any] | None = None,
    ) -> EvalReport:
        """Replay saved threads' questions with ``model`` and/or ``instructions`` (default: the
        agent's own), writes off (every write refused, as in a dry run; nothing is written),
        in threads kept only in the report, never in the store; compare the frames got with
        the frames kept, call by call and the last ones (numbers equal within ``rel_tol`` /
        ``abs_tol``), with steps, tokens, cost and time of both. ``threads``: thread ids or
        Thread values; else the threads of eval suite ``suite`` (default ``"default"``, see
        :meth:`add_eval`). See ``loom_nb._eval``."""
        from loom_nb._eval import run_eval

        return await run_eval(
            self,
            threads,
            suite=suite,
            model=model,
            instructions=instructions,
            rel_tol=rel_tol,
            abs_tol=abs_tol,
            context=context,
        )

    def eval(
        self,
        threads: Sequence[str | Thread] | str | Thread | None = None,
        *,
        suite: str | None = None,
        model: Model | str | None = None,
        instructions: str | None = None,
        rel_tol: float = 1e-9,
        abs_tol: float = 0.0,
        context: Mapping[str, Any] | None = None,
    ) -> EvalReport:
        """:meth:`eval_async` for scripts and notebook cells: ``report.to_frame()`` is one row
        per thread, ``report.threads[i].calls`` one entry per call."""
        return _loop_thread.run_sync(
            self.eval_async(
                threads,
                suite=suite,
                model=model,
                instructions=instructions,
                rel_tol=rel_tol,
                abs_tol=abs_tol,
                context=context,
            )
        )

    def add_eval(
        self,
        threads: Sequence[str | Thread] | str | Thread,
        *,
        suite: str = "default",
        context: Mapping[str, Any] | None = None,
    ) -> list[str]:
        """Mark saved threads as eval suite ``suite``, kept in the store (a thread already in
        it stays once); the suite's thread ids."""
        from loom_nb._eval import add_to_suite

        return add_to_suite(self, threads, suite, context)

    def eval_suites(self, *, context: Mapping[str, Any] | None = None) -> dict[str, list[str]]:
        """This agent's eval suites (this user's), by name, with their thread ids."""
        from loom_nb._eval import suite_store

        return suite_store(self).load_suites(self.name, user_id=self._user_id(context))

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
            budget=self.budget,
            prices=self.prices,
            check_numbers=self.check_numbers,
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
        lease: ThreadLease | None = None,
        budget: Budget | None = None,
        new: Thread | None = None,
    ) -> RunResult:
        if new is not None:  # a new thread (of a LeasedWrites store): no other run knows it
            lease = ThreadLease.for_new_thread(self.store, thread_id, new.user_id)
        elif lease is None:
            try:
                lease = await ThreadLease.acquire(self.store, thread_id, self._user_id(context))
            except KeyError:  # the stores' word for a thread they never saved (or another user's)
                raise self._not_found(thread_id) from None
        thread: Thread | None = None
        try:
            # the one load of a run: no other run can change the thread now
            thread = (
                new if new is not None else self._load_for_run(thread_id, self._user_id(context))
            )
            if prompt is not None:
                _refuse_waiting(thread)
            run = Run(self._run_deps(), thread, context, on_event, lease)
            await run.execute(prompt, resolutions, budget)
        except StoreError:
            # The store failed or hangs: asking it again would only wait for another
            # deadline. The lease lapses (or, in this process, is free at once).
            lease.release(error=None, store=False)
            self._kept.forget(thread_id)
            raise
        finally:
            if not lease.released or lease.freed_by_write:  # (a late error is still recorded)
                lease.release(error=thread.error if thread is not None else None)
                if thread is not None:
                    with contextlib.suppress(Exception):  # a failing store fails the next load
                        self._kept.keep(thread)
            if thread is not None:
                thread.lease = None  # this run freed it (or lost it, when it stopped for that)
        # The result's thread is a snapshot: the kept one goes on with the next run.
        result = RunResult(thread.status, _snapshot(thread), run.new_messages, thread.error)
        if result.status == "error":
            error = run.failure or RunError(thread.error or "the run failed")
            error.result = result
            raise error
        return result


def _snapshot(thread: Thread) -> Thread:
    """A kept thread as it is now, for a result (the kept one goes on with the next run)."""
    snapshot = shallow_copy(thread)
    snapshot.messages = list(thread.messages)
    snapshot.pending = [shallow_copy(p) for p in thread.pending]
    return snapshot


def _refuse_newer(thread: Thread) -> None:
    """A call a newer loom_nb left in a state this version does not know: only that version
    can move it on (and this one never changes it)."""
    newer = [p for p in thread.pending if p.newer]
    if newer:
        p = newer[0]
        raise UserError(
            f"thread {thread.id}: call {p.call_id} ({p.tool}) is {p.state!r}, a state {NEWER}; "
            "this version leaves the thread as it is"
        )


def _refuse_waiting(thread: Thread) -> None:
    """A new prompt waits until every call of the thread is settled."""
    _refuse_newer(thread)
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
    undecided = [p for p in thread.pending if p.state == "pending"]
    questions = [p for p in undecided if is_question(p)]
    if questions:
        p = questions[0]
        raise ThreadWaiting(
            f"thread {thread.id} waits for your answer to the agent's question (call "
            f"{p.call_id}): answer first with agent.resume(thread_id, {{{p.call_id!r}: "
            f"'your answer'}}) or %loom answer {p.call_id} TEXT",
            thread_id=thread.id,
            waiting=waiting,
        )
    if undecided:
        raise ThreadWaiting(
            f"thread {thread.id} waits for approval of "
            f"{', '.join(p.tool for p in undecided)}: approve or reject first with "
            "agent.resume(thread_id, {call_id: True/False})",
            thread_id=thread.id,
            waiting=waiting,
        )
    if thread.pending:  # decided, not run: the run that had them stopped first
        p = thread.pending[0]
        raise ThreadWaiting(
            f"thread {thread.id}: {p.tool} (call {p.call_id}) was {p.state}; "
            + way_on(p.call_id, p.state)
            + ", then send the message",
            thread_id=thread.id,
            waiting=waiting,
        )


def _approval(p: PendingApproval, value: bool | Decision) -> bool | None:
    """The decision to save for ``p``; None when ``p`` was decided so already and is waiting
    to run (its kernel stopped first): the run then goes on with it."""
    decision = value if isinstance(value, Decision) else Decision(bool(value))
    if p.state == "unknown":
        raise UserError(
            f"the outcome of call {p.call_id} ({p.tool}) is unknown: its kernel stopped while "
            "it ran, so it may have written. Approve / Reject no longer apply; "
            + way_on(p.call_id, p.state)
        )
    if decision.digest is not None and decision.digest != p.digest:
        raise UserError(
            f"the arguments of call {p.call_id!r} are not the ones that were shown; "
            "nothing was run. Review the call again before deciding"
        )
    if p.state in ("approved", "rejected") and (p.state == "approved") == decision.approve:
        return None
    if p.state != "pending":
        raise CallAlreadyDecided(p.call_id, p.state)
    return decision.approve


def _answer(p: PendingApproval, value: DecisionLike) -> ToolResult:
    """The result that answers question ``p``: the answer's text, or False to decline."""
    if p.state != "pending":
        raise CallAlreadyDecided(p.call_id, p.state)
    if isinstance(value, Decision):
        if value.digest is not None and value.digest != p.digest:
            raise UserError(
                f"the question of call {p.call_id!r} is not the one that was shown; nothing "
                "was answered. Reload the thread before answering"
            )
        value = value.approve
    if value is False:
        return declined_result(p)
    if not isinstance(value, str):
        raise UserError(
            f"call {p.call_id} is the agent's question to you: answer it with text, "
            f"agent.resume(thread_id, {{{p.call_id!r}: 'your answer'}}) (False declines it)"
        )
    return answer_result(p, checked_answer(p, value))


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


def _check_priced(budget: Budget | None, model: str, prices: Prices | None, where: str) -> None:
    if budget is not None and budget.money and cost_of(model, Usage(1, 1, 1), prices) is None:
        raise UserError(
            f"{where}(budget=...) bounds dollars, but the price of {model} is unknown: pass "
            "define_agent(prices={'input': ..., 'output': ...}) in US dollars per million "
            "tokens, or bound tokens instead ({'tokens': N})"
        )


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
    ask_user: bool = True,
    budget: Mapping[str, float] | None = None,
    prices: Mapping[str, float] | None = None,
    check_numbers: CheckNumbers = "warn",
) -> Agent:
    """Define an agent. Every configuration mistake raises here, before any run.

    ``ask_user``: the agent may ask you a question (the built-in ``ask_user`` tool); the run
    then waits for your answer as it waits for an approval. ``ask_user=False`` leaves it out.

    ``store`` defaults to the one named by ``LOOM_STORE`` (a SQLite path or a ``postgresql://``
    URL), else ``sqlite_store()`` at ``.loom/loom.db``: threads survive a kernel restart.
    ``auth(context) -> user_id`` scopes threads to users. ``interrupt_wait``: seconds Ctrl-C
    waits for an approved write that is running to finish, so that its result is saved; after
    that its outcome is recorded as unknown.

    ``budget`` bounds what runs use before they pause with a card, like an approval
    (Continue grants the same amount again): ``{"tokens": N}`` (a run's tokens in and out,
    since its prompt), ``{"usd": X}`` (its cost), ``"thread_tokens"`` / ``"thread_usd"`` (the
    whole thread's). Reaching ``max_steps`` pauses the same way. ``prices`` is the model's
    price in US dollars per million tokens (``{"input": 0.4, "output": 1.6}``, also
    ``"cache_read"`` / ``"cache_write"``) when genai-prices' table does not know it.

    ``check_numbers``: every number an answer states is traced to the thread's tool results
    (see :func:`trace_numbers`). ``"warn"`` (default) marks those in no result in every view
    and the export; ``"strict"`` also sends them back to the model once, as loom_nb's own
    ``check_numbers`` call, before the answer is final (the first answer stays in the thread);
    ``"off"`` traces nothing during runs and marks nothing in the agent's views (a saved
    thread shown again, its static copy, the export).
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
        or not 0 <= interrupt_wait < float("inf")  # NaN too
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
    if not isinstance(check_numbers, str) or check_numbers not in CHECK_NUMBERS:
        raise UserError(
            f"define_agent(check_numbers=...) is one of {', '.join(map(repr, CHECK_NUMBERS))}, "
            f"got {check_numbers!r}"
        )
    if not isinstance(ask_user, bool):
        raise UserError(f"define_agent(ask_user=...) is True or False, got {ask_user!r}")
    given_ask = [found[ASK_USER] for _, found in sources if ASK_USER in found]
    if ask_user and not (given_ask and is_built_in(given_ask[0])):  # tools=other_agent.tools
        sources.append(
            (
                "loom_nb's question tool (define_agent(ask_user=False) leaves it out)",
                {ASK_USER: ask_user_tool()},
            )
        )
    for where, found in sources:
        for tool_name, t in found.items():
            if tool_name == ASK_USER and is_built_in(t) and not ask_user:
                continue  # another agent's tools, given with the question tool turned off
            if tool_name == RECALL:
                raise UserError(
                    f"{where} has a tool named {RECALL!r}, the name of loom_nb's own tool that "
                    "reads a kept result back: name it differently"
                )
            if tool_name == CHECK_TOOL:
                raise UserError(
                    f"{where} has a tool named {CHECK_TOOL!r}, the name of loom_nb's own call "
                    "that sends an answer's unchecked numbers back: name it differently"
                )
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
    resolved = resolve_model(model)
    checked_prices = check_prices(prices)
    checked_budget = check_budget(budget, "define_agent")
    _check_priced(checked_budget, resolved.name, checked_prices, "define_agent")
    return Agent(
        name=name,
        model=resolved,
        instructions=instructions,
        tools=all_tools,
        store=store,
        auth=auth,
        max_steps=max_steps,
        model_settings=check_model_settings(model_settings),
        interrupt_wait=float(interrupt_wait),
        budget=checked_budget,
        prices=checked_prices,
        check_numbers=check_numbers,
    )
