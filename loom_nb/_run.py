"""The agent loop: model turn, tool calls, tool results, approvals, saving.

One :class:`Run` drives one thread, holding the thread's lease, until it completes, stops for
approval, or fails. Each completed message is appended to the store at once, so an interrupted
run keeps what finished; after Ctrl-C it appends nothing more.

A turn that asks for approval is saved with its pending calls and their previews in one
transaction (previews are computed first). Decided calls then move through their lifecycle in
the store, each step a compare-and-set: approved -> running (claimed by this run) -> done (the
result saved in the same transaction), or unknown when the run stops while the tool runs.

The loop is given what it reads as one :class:`RunDeps`; it never sees the ``Agent``, so this
module does not import ``loom_nb._agent`` (the agent imports it).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from loom_nb import _budget, _loop_thread
from loom_nb._ask import ASK_USER
from loom_nb._budget import Budget, Prices, budget_pause, cost_of, pause_result, steps_pause
from loom_nb._context import RunContext
from loom_nb._errors import (
    CallAlreadyDecided,
    RunError,
    StoreError,
    StoreUnreachable,
    ThreadBusy,
    UserError,
)
from loom_nb._events import ApprovalRequested, EventHandler, MessageAdded, RunEvent
from loom_nb._history import HISTORY_TOKENS, RECALL, HistoryView, View, recall_tool
from loom_nb._lease import ThreadLease
from loom_nb._messages import (
    CallState,
    Interrupted,
    Message,
    Part,
    PendingApproval,
    Resolution,
    Thread,
    ToolCall,
    ToolResult,
    Usage,
    is_pause_call,
)
from loom_nb._numbers import (
    CHECK_TOOL,
    CheckNumbers,
    TracedNumber,
    correction,
    new_check_id,
    trace_message,
    unmatched,
)
from loom_nb._rules import Rule, RuleStore, deciding_rule
from loom_nb._store import LEASE_SECONDS, Store, leased_writes
from loom_nb._tokens import counter_for
from loom_nb._tools import Bound, Tool
from loom_nb._turn import (
    check_call,
    definitions,
    error_result,
    invoke,
    model_turn,
    pending_of,
    rejected,
)
from loom_nb.models import Model, ModelSettings, ToolDefinition

__all__ = ["INTERRUPTED", "Run", "RunDeps"]

INTERRUPTED = "The run was interrupted; what completed is saved."
#: How long a run tries again to save a write's result while its store is away (a restart).
RESULT_RETRY_SECONDS = 30.0
RESULT_RETRY_PAUSE = 1.0
_LOST = (
    "The run stopped while this call ran (its kernel stopped, was interrupted or lost its "
    "store), before its result was saved. The user checked: "
)
HAPPENED = _LOST + "it took effect. Its output was lost."
FAILED = _LOST + "it did not take effect. Treat it as failed; ask the user before trying again."


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
    #: Model turns allowed before the run pauses (a ``max_steps`` pause; Continue grants
    #: as many again).
    max_steps: int
    #: Seconds an interrupted run waits for its running approved writes to finish (so their
    #: results are saved) before recording their outcome as unknown.
    interrupt_wait: float = 5.0
    #: The agent's budget (a run's own, on its user message, wins key by key).
    budget: Budget | None = None
    #: The model's prices, when the price table does not know it.
    prices: Prices | None = None
    #: What becomes of an answer's numbers that are in no result (see ``define_agent``).
    check_numbers: CheckNumbers = "warn"


class Run:
    """One run of the loop over one thread, under the thread's lease."""

    def __init__(
        self,
        deps: RunDeps,
        thread: Thread,
        context: Mapping[str, Any] | None,
        on_event: EventHandler | None,
        lease: ThreadLease,
    ) -> None:
        self.deps = deps
        self.thread = thread
        self.store = deps.store
        self.on_event = on_event
        self.lease = lease
        self.ctx = RunContext(
            deps.agent_name,
            thread.id,
            thread.user_id,
            dict(context or {}),
            _results=thread.tool_results,
        )
        self.new_messages: list[Message] = []
        self.failure: RunError | None = None
        #: The agent's tools and the built-in ``recall``.
        self.tools: dict[str, Tool] = {**deps.tools, RECALL: recall_tool()}
        self.counter = counter_for(deps.model.name)
        self.history = HistoryView(
            int(deps.settings.get("history_tokens", HISTORY_TOKENS)), self.counter
        )
        #: The input tokens the provider reported at the last turn, and what was counted of
        #: that request (None: not known yet in this run).
        self._reported: tuple[int, int] | None = None
        #: The numbers of the last assistant message added, and whether this run has sent
        #: its strict correction (once a run).
        self._numbers: tuple[TracedNumber, ...] = ()
        self._corrected = False
        #: The tools as the model is told of them, without and with ``recall``.
        self._tool_definitions: dict[bool, list[ToolDefinition]] = {}
        #: Whether an answer's numbers are traced as it is added: for ``on_event`` (the views
        #: mark them) and for the strict check. Unobserved, they are not: ``trace_numbers``
        #: on the thread gives the same marks when asked.
        check = deps.check_numbers
        self._traces = check == "strict" or (check != "off" and on_event is not None)

    async def emit(self, event: RunEvent) -> None:
        """Hand ``event`` to ``on_event``, awaiting it if it is async."""
        if self.on_event is not None:
            outcome = self.on_event(event)
            if inspect.isawaitable(outcome):
                await outcome

    async def execute(
        self,
        prompt: str | None,
        resolutions: Mapping[str, Resolution] | None = None,
        budget: Budget | None = None,
    ) -> None:
        """Send ``prompt``, or go on with the decided calls (``None``), until the run ends.

        A :class:`RunError` is recorded and kept in :attr:`failure`; anything else is recorded
        in the thread and raised. Freeing the lease saves the record (see ``Agent._drive``).
        ``budget`` is this run's own, saved with its prompt.
        """
        was_interrupted, self.thread.error = self.thread.error == INTERRUPTED, None
        try:
            # the last run was interrupted: the thread keeps where (its error goes now)
            if prompt is not None:
                await self._close_dangling_calls(was_interrupted)
                asked = Message.user(prompt)
                asked.budget = budget.to_dict() if budget is not None else None
                await self._add(asked)
            elif was_interrupted:
                await self._add(Message("tool", [Interrupted()]))
            elif not await self._decided(resolutions or {}):
                return  # a call still waits for the user
            await self._loop()
        except asyncio.CancelledError:
            self.thread.error = INTERRUPTED
            raise
        except RunError as exc:
            self.thread.error = str(exc)
            self.failure = exc
        except UserError:
            raise
        except StoreError as exc:  # the store cannot record it; say what is kept
            n = len(self.new_messages)
            kept = (
                f"the {n} message{'s' if n != 1 else ''} this run completed before that "
                + ("are saved" if n != 1 else "is saved")
                if n
                else "this run had completed no message before that"
            )
            raise type(exc)(f"{exc}. Thread {self.thread.id}: {kept}") from None
        except Exception as exc:  # a bug: record it, then raise as is
            self.thread.error = f"{type(exc).__name__}: {exc}"
            raise

    # ---- saving -------------------------------------------------------------------------------

    def _may_write(self) -> None:
        if _loop_thread.interrupted():  # Ctrl-C returned already: this run appends nothing more
            raise asyncio.CancelledError
        self.lease.check()

    async def _add(
        self, message: Message, *, pending: Sequence[PendingApproval] = (), last: bool = False
    ) -> None:
        """Append a completed message, with the calls it asks approval for: saved at once.
        The lease rides on the write where the store can carry it: a new thread's first
        message creates the thread held, and the run's ``last`` message frees it."""
        self._may_write()
        self.thread.updated_at = message.created_at
        store, lease = self.store, self.lease
        if not lease.in_store:  # only a LeasedWrites store makes a thread this way
            assert leased_writes(store) and not pending
            store.start(self.thread, message, holder=lease.holder, seconds=LEASE_SECONDS)
            lease.started()
        elif last and not pending and leased_writes(store):
            lease.free_with(lambda: store.finish(self.thread, message, holder=lease.holder))
        elif pending:
            self.store.append(self.thread, message, pending=pending)
            self.thread.pending = list(pending)
        else:
            self.store.append(self.thread, message)
        self._added(message)
        self._numbers = ()
        if self._traces and message.role == "assistant" and message.text:
            messages = self.thread.messages
            self._numbers = tuple(trace_message(messages, len(messages) - 1))
        if self.on_event is not None:
            await self.emit(MessageAdded(message, self.thread.id, self._numbers))

    def _added(self, message: Message) -> None:
        self.thread.messages.append(message)
        self.thread.updated_at = message.created_at
        self.new_messages.append(message)

    def _move(
        self,
        calls: Sequence[PendingApproval],
        state: CallState,
        expect: set[CallState],
        *,
        message: Message | None = None,
        any_holder: bool = False,
    ) -> None:
        """One lifecycle step of ``calls``: in the store (compare-and-set), then here. With
        ``message`` (their results) they are done and leave the pending list."""
        if not calls:
            return
        holder = None if any_holder else self.lease.holder
        self.store.update_calls(
            self.thread.id,
            [p.call_id for p in calls],
            state,
            expect=expect,
            holder=holder,
            message=message,
            user_id=self.thread.user_id,
        )
        self._move_here(calls, state, message, holder)

    def _move_here(
        self,
        calls: Sequence[PendingApproval],
        state: CallState,
        message: Message | None,
        holder: str | None = None,
    ) -> None:
        """``_move``'s step in this run's copy of the thread, once the store made it."""
        ids = [p.call_id for p in calls]
        for p in calls:
            p.state = state
            if state == "running":
                p.holder = holder
        if message is not None:
            self.thread.pending = [p for p in self.thread.pending if p.call_id not in ids]
            self._added(message)

    # ---- the loop -----------------------------------------------------------------------------

    async def _loop(self) -> None:
        deps = self.deps
        for _ in range(deps.max_steps):
            view = self.history.view(self.thread.messages)
            tools = self._definitions(view)
            if await self._over_budget(view, tools):
                return  # paused
            message = await model_turn(
                deps.model,
                deps.instructions,
                tools,
                deps.settings,
                view.messages,
                self.emit if self.on_event is not None else None,
            )
            self._account(message, view, tools)
            if not message.tool_calls:
                # In strict mode the answer may yet be sent back: the lease is freed after it.
                await self._add(
                    message, last=self.deps.check_numbers != "strict" or self._corrected
                )
                if await self._check_numbers():
                    continue  # the model answers again, told which numbers it made up
                return
            if await self._run_calls(message):
                return  # stopped for approval
        await self._pause(*steps_pause(deps.max_steps))

    async def _check_numbers(self) -> bool:
        """``check_numbers="strict"``: the answer's numbers in no result go back to the model
        once, as loom_nb's own call and its error result; True when they did."""
        missing = unmatched(self._numbers)
        if self.deps.check_numbers != "strict" or self._corrected or not missing:
            return False
        self._corrected = True
        call = ToolCall(new_check_id(), CHECK_TOOL, {"numbers": [n.text for n in missing]})
        await self._add(Message("assistant", [call]))
        said = correction(missing)
        await self._add(Message("tool", [ToolResult(call.id, CHECK_TOOL, said, is_error=True)]))
        return True

    def _definitions(self, view: View) -> list[ToolDefinition]:
        """The agent's tools, and ``recall`` once a result is left out of the view: made once
        a run for each (the turns' requests share them, as they share the tools)."""
        shortened = view.shortened
        made = self._tool_definitions.get(shortened)
        if made is None:
            made = definitions(self.tools if shortened else self.deps.tools)
            self._tool_definitions[shortened] = made
        return made

    def _account(self, message: Message, view: View, tools: list[ToolDefinition]) -> None:
        """The turn's cost, and how the provider's count compared with ours."""
        usage = message.usage
        if usage is None or usage.empty:
            return
        usage.cost = cost_of(self.deps.model.name, usage, self.deps.prices)
        if usage.input_tokens > 0:
            counted = self.counter.request(self.deps.instructions, tools, view.messages)
            self._reported = (usage.input_tokens, counted)

    async def _pause(self, message: Message, pending: PendingApproval) -> None:
        """Save a pause with its card, as an approval is saved; the run then ends."""
        await self._add(message, pending=[pending])
        await self.emit(ApprovalRequested(list(self.thread.pending), self.thread.id))

    def _budget(self) -> Budget | None:
        """The agent's budget, with the run's own (on its prompt) winning key by key."""
        prompt = _budget.since_prompt(self.thread.messages)
        own = prompt[0].budget if prompt and prompt[0].role == "user" else None
        if own is None:
            return self.deps.budget
        return (self.deps.budget or Budget({})).over(Budget(own))

    async def _over_budget(self, view: View, tools: list[ToolDefinition]) -> bool:
        """Pause (True) when the next model turn would pass a budget."""
        budget = self._budget()
        if budget is None:
            return False
        messages = self.thread.messages
        counted = self.counter.request(self.deps.instructions, tools, view.messages)
        reported = self._last_report()
        # the provider's own count of the last request, and ours of what changed since
        turn_in = counted if reported is None else max(reported[0] + counted - reported[1], 0)
        last = next((m.usage for m in reversed(messages) if m.usage and not m.usage.empty), None)
        turn_out = last.output_tokens if last is not None else 0
        for scope, unit, limit in _budget.limits(budget):
            mine = _budget.since_prompt(messages) if scope == "run" else messages
            used = _budget.spent(mine, unit)
            allowed = limit + _budget.granted(mine, scope, unit)
            turn: float = turn_in + turn_out
            if unit == "usd":
                estimate = Usage(turn_in, turn_out, 1)
                turn = cost_of(self.deps.model.name, estimate, self.deps.prices) or 0.0
            if used + turn > allowed:
                await self._pause(*budget_pause(scope, unit, used, allowed, limit, turn))
                return True
        return False

    def _last_report(self) -> tuple[int, int] | None:
        """:attr:`_reported`; a resumed run finds it from the thread (the last turn that
        reported input tokens, and the view it was sent, counted again)."""
        if self._reported is None:
            messages = self.thread.messages
            for i in range(len(messages) - 1, -1, -1):
                usage = messages[i].usage
                if usage is not None and usage.input_tokens > 0:
                    before = self.history.view(messages[:i])
                    tools = self._definitions(before)
                    counted = self.counter.request(self.deps.instructions, tools, before.messages)
                    self._reported = (usage.input_tokens, counted)
                    break
        return self._reported

    async def _run_calls(self, message: Message) -> bool:
        """Save the turn with its calls that wait for approval (previews computed first, so no
        kill leaves a call without its card), then run the others. True if any wait."""
        calls = message.tool_calls
        results: dict[str, ToolResult] = {}
        runnable: list[tuple[ToolCall, Tool, Bound]] = []
        pending: list[PendingApproval] = []
        rules: list[Rule] | None = None
        for call in calls:
            checked = check_call(call, self.tools)
            if isinstance(checked, ToolResult):
                results[call.id] = checked
                continue
            tool, bound = checked
            if tool.requires_approval(call.arguments or {}):
                waiting = await pending_of(call, tool, self.ctx)  # one preview at a time
                if isinstance(waiting, ToolResult):  # its preview found it cannot work
                    results[call.id] = waiting
                    continue
                if call.name != ASK_USER:  # a question is for a person, never a rule
                    rules = self._rules() if rules is None else rules
                    effect = tool.effect_of(call.name, waiting.arguments, waiting.preview)
                    rule = deciding_rule(rules, self.thread.id, effect)
                    if rule is not None:  # decided as a click would, naming the rule
                        waiting.state = "approved" if rule.kind == "allow" else "rejected"
                        waiting.rule = rule.id
                pending.append(waiting)
            else:
                runnable.append((call, tool, bound))
        waits = any(p.state == "pending" for p in pending)
        if not waits:  # rules decided them all: claimed with the turn, in one transaction
            for p in pending:
                if p.state == "approved":
                    p.state, p.holder = "running", self.lease.holder
        await self._add(message, pending=pending)
        runs = [invoke(c, t, self.ctx, bound=b) for c, t, b in runnable]
        if len(runs) == 1:  # (gather would wrap the one call in a task of its own)
            outcomes = [await runs[0]]
        else:
            outcomes = await asyncio.gather(*runs)
        results.update({r.call_id: r for r in outcomes})
        if results:
            await self._add(Message("tool", [results[c.id] for c in calls if c.id in results]))
        if waits:
            await self.emit(ApprovalRequested(list(self.thread.pending), self.thread.id))
            return True
        if pending:
            await self._run_decided()
        return False

    def _rules(self) -> list[Rule]:
        """The agent's rules as the store has them now (one read a turn that needs them): a
        rule revoked in another kernel decides nothing more here."""
        store = self.store
        if not isinstance(store, RuleStore):
            return []
        return store.load_rules(self.deps.agent_name, user_id=self.thread.user_id)

    async def _close_dangling_calls(self, interrupted: bool = False) -> None:
        """Calls left without a result (an interrupted run) get one, so the model can go on;
        with them (or alone) the :class:`Interrupted` part that marks where the last run
        was interrupted, when it was.

        Only the messages since the last user message are read: each run starts here, so the
        calls before its user message have results, and a turn costs the same on a long thread.
        """
        since = _since_last_user(self.thread.messages)
        answered = {r.call_id for m in since for r in m.tool_results}
        waiting = {p.call_id for p in self.thread.pending}
        dangling = [
            c for m in since for c in m.tool_calls if c.id not in answered and c.id not in waiting
        ]
        said = "This call was interrupted before it finished."
        parts: list[Part] = [error_result(c, said) for c in dangling]
        if interrupted:
            parts.append(Interrupted())
        if parts:
            await self._add(Message("tool", parts))

    # ---- decided calls ------------------------------------------------------------------------

    async def _decided(self, resolutions: Mapping[str, Resolution]) -> bool:
        """Carry the decided calls through. False when a call still waits for the user."""
        pending = self.thread.pending
        # Loading showed calls a run that is gone left running as unknown; record that.
        orphans = [p for p in pending if p.state == "unknown"]
        self._move(orphans, "unknown", {"running", "unknown"}, any_holder=True)
        by_id = {p.call_id: p for p in pending}
        for call_id in resolutions:
            found = by_id.get(call_id)
            if found is None or found.state != "unknown":
                raise CallAlreadyDecided(call_id, found.state if found else "done")
        told = [by_id[c] for c, choice in resolutions.items() if choice != "retry"]
        if told:
            self._may_write()
            message = Message("tool", [_told(p, resolutions[p.call_id]) for p in told])
            self._move(told, "done", {"unknown"}, message=message)
            await self.emit(MessageAdded(message, self.thread.id))
        again = [by_id[c] for c, choice in resolutions.items() if choice == "retry"]
        self._move(again, "approved", {"unknown"})  # the user chose to run it again
        if any(p.state in ("pending", "unknown") or p.newer for p in self.thread.pending):
            return False  # their cards are shown already; the result lists them
        await self._run_decided()
        await self._close_dangling_calls()
        # a pause answered with Stop ends the run here
        return not any(_budget.stopped(m.tool_results) for m in self.new_messages)

    async def _run_decided(self) -> None:
        """Claim the approved calls and run them; save every result in call order, each batch
        with its calls' "done" in one transaction. Interrupted, wait a bounded time for the
        running ones, save what finished, and record the rest as unknown."""
        calls = list(self.thread.pending)
        tools = self.deps.tools
        # Claimed here, or already with the decision (under this run's lease: one transaction).
        mine = {p.call_id for p in calls if p.state == "running" and p.holder == self.lease.holder}
        claiming = [
            p
            for p in calls
            if p.state == "approved" and p.tool in tools and not is_pause_call(p.call_id)
        ]
        self._move(claiming, "running", {"approved"})
        mine.update(p.call_id for p in claiming)
        claimed = [p for p in calls if p.call_id in mine]
        tasks = {
            p.call_id: asyncio.ensure_future(_invoke_decided(p, tools[p.tool], self.ctx))
            for p in claimed
        }
        ready: dict[str, ToolResult] = {}
        for p in calls:
            if is_pause_call(p.call_id):
                ready[p.call_id] = pause_result(p)
            elif p.state == "rejected":
                ready[p.call_id] = dataclasses.replace(rejected(_call(p)), rule=p.rule)
            elif p.call_id not in tasks:
                gone = f"The agent has no tool {p.tool!r} any more; nothing was run."
                ready[p.call_id] = error_result(_call(p), gone, "approved")
        gave_up: list[bool] = []
        token = _loop_thread.interrupt()
        guard: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
        if token is not None and claimed:
            label = ", ".join(sorted({p.tool for p in claimed}))
            guard = token.protect(
                label,
                self.deps.interrupt_wait,
                self._giving_up(gave_up),
                running=lambda: not all(t.done() for t in tasks.values()),
            )
        with guard:
            try:
                while calls:
                    first = calls[0].call_id
                    if first not in ready:
                        ready[first] = await asyncio.shield(tasks[first])
                    _collect(tasks, ready)
                    batch = _leading(calls, ready)
                    if _loop_thread.interrupted():
                        raise asyncio.CancelledError
                    message = Message("tool", [ready[p.call_id] for p in batch])
                    ran = ", ".join(p.tool for p in batch if p.call_id in tasks)
                    await self._save_results(batch, message, ran)
                    await self.emit(MessageAdded(message, self.thread.id))
                    calls = calls[len(batch) :]
            except asyncio.CancelledError:
                await self._interrupted(calls, tasks, ready, gave_up)
                raise

    async def _save_results(
        self, batch: Sequence[PendingApproval], message: Message, ran: str
    ) -> None:
        """Save ``batch``'s results with their "done". A write that ran is saved whenever this
        run still holds its call, lease or not (a pause past the lease that no other kernel
        used): the compare-and-set on the call's holder is the guard. A store that is away is
        tried again until it is back, for up to a lease's length."""
        deadline = time.monotonic() + RESULT_RETRY_SECONDS
        tried = False
        while True:
            try:
                self._move(batch, "done", {"running", "approved", "rejected"}, message=message)
                return
            except CallAlreadyDecided as exc:
                if tried and exc.state == "done" and self._landed(message):
                    self._move_here(batch, "done", message)  # the try before was saved after all
                    return
                if not ran:
                    raise
                raise ThreadBusy(
                    f"{ran} ran, but its result could not be saved: another run took thread "
                    f"{self.thread.id} over while this one was paused, and the call is "
                    f"{exc.state} there. Tell that thread what happened: {ran} ran"
                ) from None
            except StoreUnreachable as exc:
                if not ran or time.monotonic() > deadline:
                    raise type(exc)(f"{ran} ran; its result could not be saved: {exc}") from None
                tried = True
                await asyncio.sleep(RESULT_RETRY_PAUSE)
            except StoreError as exc:
                if not ran:
                    raise
                raise type(exc)(f"{ran} ran; its result could not be saved: {exc}") from None

    def _landed(self, message: Message) -> bool:
        """Whether ``message`` (results whose save failed without an answer) is in the store."""
        saved = self.store.load(self.thread.id, user_id=self.thread.user_id)
        mark = (message.created_at, [r.call_id for r in message.tool_results])
        return saved is not None and any(
            (m.created_at, [r.call_id for r in m.tool_results]) == mark
            for m in reversed(saved.messages)
        )

    def _giving_up(self, gave_up: list[bool]) -> Callable[[], None]:
        """For the main thread, when Ctrl-C stops waiting: record still-running calls as
        unknown (the store is thread-safe; a call saved meanwhile does not match)."""

        def give_up() -> None:
            gave_up.append(True)
            for p in list(self.thread.pending):
                if p.state == "running" and p.holder == self.lease.holder:
                    with contextlib.suppress(Exception):
                        self.store.update_calls(
                            self.thread.id,
                            [p.call_id],
                            "unknown",
                            expect={"running"},
                            holder=self.lease.holder,
                            user_id=self.thread.user_id,
                        )

        return give_up

    async def _interrupted(
        self,
        calls: list[PendingApproval],
        tasks: Mapping[str, asyncio.Future[ToolResult]],
        ready: dict[str, ToolResult],
        gave_up: list[bool],
    ) -> None:
        running = [t for t in tasks.values() if not t.done()]
        if running:
            with contextlib.suppress(asyncio.CancelledError):  # Ctrl-C again: stop waiting
                await asyncio.wait(running, timeout=self.deps.interrupt_wait)
        _collect(tasks, ready)
        if gave_up:  # the main thread recorded the outcome already
            return
        finished = [p for p in calls if p.call_id in ready]
        message = Message("tool", [ready[p.call_id] for p in finished])
        with contextlib.suppress(Exception):
            self._move(finished, "done", {"running", "approved", "rejected"}, message=message)
        with contextlib.suppress(Exception):
            self._move([p for p in calls if p.call_id not in ready], "unknown", {"running"})


async def _invoke_decided(p: PendingApproval, tool: Tool, ctx: RunContext) -> ToolResult:
    """Run an approved call, held to its card; a rule's approval is named in its result."""
    result = await invoke(_call(p), tool, ctx, "rule" if p.rule else "approved", p.preview)
    return dataclasses.replace(result, rule=p.rule) if p.rule else result


def _call(p: PendingApproval) -> ToolCall:
    return ToolCall(p.call_id, p.tool, p.arguments)


def _told(p: PendingApproval, choice: Resolution) -> ToolResult:
    if choice == "happened":
        return ToolResult(
            p.call_id, p.tool, json.dumps({"outcome": HAPPENED}), None, False, "approved"
        )
    return error_result(_call(p), FAILED, "approved")


def _collect(tasks: Mapping[str, asyncio.Future[ToolResult]], ready: dict[str, ToolResult]) -> None:
    for call_id, task in tasks.items():
        if call_id not in ready and task.done() and not task.cancelled():
            ready[call_id] = task.result()


def _leading(
    calls: Sequence[PendingApproval], ready: Mapping[str, ToolResult]
) -> list[PendingApproval]:
    """The calls at the front whose results are ready: saved together, in call order."""
    batch = []
    for p in calls:
        if p.call_id not in ready:
            break
        batch.append(p)
    return batch


def _since_last_user(messages: list[Message]) -> list[Message]:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user":
            return messages[i + 1 :]
    return messages
