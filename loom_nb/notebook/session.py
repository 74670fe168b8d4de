"""The kernel-side state behind the magics: the current thread per agent, runs, decisions.

Cells run an agent with ``_loop_thread.run_sync`` (the private loop on its daemon thread; the
kernel stays unpatched). Buttons start work with ``_loop_thread.submit`` and return at once, from
whatever thread delivers the click. Everything that touches one thread's pending calls runs
under one asyncio lock per thread on that loop, so two quick clicks never resume twice.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import weakref
from collections.abc import Coroutine, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from IPython.core.error import UsageError

from loom_nb import _loop_thread
from loom_nb._agent import Agent, Decision, DecisionLike, RunResult
from loom_nb._errors import RunError, UserError
from loom_nb._events import RunEvent
from loom_nb._messages import PendingApproval, Resolution, Thread


class Settings(Protocol):
    default_agent: str
    rows: int
    stream_interval: float
    display: str
    context: str


class View(Protocol):
    thread_id: str | None

    def show(self) -> None: ...
    def render(self, thread: Thread, *, history: bool = True) -> None: ...
    def begin(self) -> None: ...
    def on_event(self, event: RunEvent) -> None: ...
    def finish(self, result: RunResult | None, error: BaseException | None) -> None: ...


class RunFailed(RunError):
    """A ``%%loom`` run failed. Shown as one line, and stops "Run All"."""

    def _render_traceback_(self) -> list[str]:
        return [f"RunFailed: {self}"]


@dataclass
class Binding:
    """Names the magic assigns: -o (last DataFrame), -O (all of them), --result."""

    out: str | None = None
    out_all: str | None = None
    result: str | None = None


@contextmanager
def usage_errors() -> Iterator[None]:
    """Core mistakes (unknown thread, pending approvals, ...) become one-line UsageErrors."""
    try:
        yield
    except UserError as exc:
        raise UsageError(str(exc)) from None


class Session:
    """One per IPython shell; the magics delegate every action here."""

    def __init__(self, shell: Any, settings: Settings) -> None:
        self.shell = shell
        self.settings = settings
        #: agent name -> the thread ``%%loom`` continues (None: the next run starts one).
        self.current: dict[str, str | None] = {}
        self.last_agent: str | None = None
        self.last_view: View | None = None
        #: The chat widget %loom AGENT showed last.
        self.last_chat: Any = None
        self.last_result: RunResult | None = None
        self.futures: list[concurrent.futures.Future[Any]] = []
        self._lock = threading.Lock()
        self._decided: set[str] = set()
        self._thread_locks: dict[str, asyncio.Lock] = {}  # used on the loop thread only
        self._views: weakref.WeakSet[Any] = weakref.WeakSet()

    # ---- agents and threads ----------------------------------------------------------------

    @property
    def namespace(self) -> dict[str, Any]:
        ns: dict[str, Any] = self.shell.user_ns
        return ns

    def context(self) -> Mapping[str, Any] | None:
        """The ``context=`` for runs: the dict named by ``LoomMagics.context`` (auth hooks and
        client factories read the signed-in user from it)."""
        name = self.settings.context
        if not name:
            return None
        value = self.namespace.get(name)
        if not isinstance(value, Mapping):
            raise UsageError(
                f"LoomMagics.context names {name!r}, which is not a dict in this notebook: "
                f"define it (e.g. {name} = {{'user': 'ann'}}) or %config LoomMagics.context = ''"
            )
        return value

    def agents(self) -> dict[str, Agent]:
        """Agents in the user's namespace, by variable name."""
        return {
            k: v
            for k, v in self.namespace.items()
            if isinstance(v, Agent) and not k.startswith("_")
        }

    def agent(self, name: str | None) -> Agent:
        found = self.agents()
        if not name:
            name = self.settings.default_agent or (next(iter(found)) if len(found) == 1 else "")
            if not name:
                listed = ", ".join(found) or "none defined yet"
                raise UsageError(
                    f"name the agent: %%loom AGENT (agents here: {listed}), "
                    "or set %config LoomMagics.default_agent = 'NAME'"
                )
        value = self.namespace.get(name)
        if not isinstance(value, Agent):
            listed = ", ".join(found) or "none: define one with define_agent(...)"
            what = "is not defined" if value is None else f"is a {type(value).__name__}"
            raise UsageError(f"{name!r} {what}, not an agent; agents here: {listed}")
        return value

    def unique_agents(self) -> list[Agent]:
        seen: dict[tuple[str, int], Agent] = {}
        for a in self.agents().values():
            seen.setdefault((a.name, id(a.store)), a)
        return list(seen.values())

    def find_thread(self, thread_id: str) -> tuple[Agent, Thread]:
        for a in self.unique_agents():
            try:
                return a, a.thread(thread_id, context=self.context())
            except UserError:
                continue
        raise UsageError(
            f"no thread {thread_id!r} for the agents here; list them with %loom threads"
        )

    def pending(self) -> list[tuple[Agent, Thread]]:
        """Threads with calls waiting for a decision, current threads first."""
        out: list[tuple[Agent, Thread]] = []
        for a in self.unique_agents():
            for info in a.threads(context=self.context(), limit=1000):
                if info.pending_count:
                    out.append((a, a.thread(info.id, context=self.context())))
        current = set(self.current.values())
        out.sort(key=lambda pair: pair[1].id not in current)
        return out

    def threads_frame(self, agent_name: str | None) -> Any:
        import pandas as pd

        agents = [self.agent(agent_name)] if agent_name else self.unique_agents()
        rows = [
            {
                "id": i.id,
                "title": i.title,
                "agent": i.agent,
                "updated": i.updated_at,
                "messages": i.message_count,
                "pending": i.pending_count,
                "current": self.current.get(i.agent) == i.id,
            }
            for a in agents
            for i in a.threads(context=self.context(), limit=1000)
        ]
        columns = ["id", "title", "agent", "updated", "messages", "pending", "current"]
        frame = pd.DataFrame(rows, columns=columns)
        return frame.sort_values("updated", ascending=False, ignore_index=True)

    # ---- views ------------------------------------------------------------------------------

    def widgets_mode(self) -> bool:
        mode = self.settings.display
        if mode != "auto":
            return mode == "widgets"
        if type(self.shell).__name__ == "TerminalInteractiveShell":
            return False
        return getattr(self.shell, "kernel", None) is not None

    def make_view(self, agent: Agent) -> View:
        view: View
        if self.widgets_mode():
            from loom_nb.notebook.widgets import ThreadView

            view = ThreadView(
                agent_name=agent.name,
                rows=self.settings.rows,
                interval=self.settings.stream_interval,
                resumer=self._resumer(agent),
            )
            self._views.add(view)
        else:
            from loom_nb.notebook.text import TextView

            view = TextView(title=agent.name, rows=self.settings.rows)
        self.last_view = view
        return view

    # ---- runs ---------------------------------------------------------------------------------

    def run_cell(
        self, agent: Agent, prompt: str, *, new: bool, thread_id: str | None, binding: Binding
    ) -> RunResult:
        """``%%loom``: run and show the thread as it streams; blocks the cell until it ends."""
        with usage_errors():
            if thread_id is not None:
                agent.thread(thread_id, context=self.context())
            tid = None if new else thread_id or self.current.get(agent.name)
            if tid is not None:
                self._refuse_pending(agent.thread(tid, context=self.context()))
        self.last_agent = agent.name
        view = self.make_view(agent)
        view.binding = binding  # type: ignore[attr-defined]
        view.show()
        view.begin()
        try:
            with usage_errors():
                result = agent.run_sync(
                    prompt, thread_id=tid, context=self.context(), on_event=view.on_event
                )
        except RunError as exc:
            failed: RunResult | None = exc.result
            self._finish(agent, view, failed, exc)
            raise RunFailed(f"{agent.name}: {exc}", result=failed) from None
        except BaseException as exc:
            self._finish(agent, view, None, exc)
            raise
        self._finish(agent, view, result, None)
        self.bind(binding, result)
        return result

    def _finish(
        self, agent: Agent, view: View, result: RunResult | None, error: BaseException | None
    ) -> None:
        view.finish(result, error)
        tid = result.thread.id if result is not None else view.thread_id
        if tid is not None:
            self.current[agent.name] = tid
        if result is not None:
            self.last_result = result

    def _refuse_pending(self, thread: Thread) -> None:
        waiting = [p for p in thread.pending if p.decision is None]
        if waiting:
            ids = " ".join(p.call_id for p in waiting)
            raise UsageError(
                f"thread {thread.id} waits for approval of {waiting[0].tool} ({ids}): click "
                f"Approve/Reject, or run %loom approve {waiting[0].call_id} / %loom reject "
                f"{waiting[0].call_id}, or start a new thread with --new"
            )

    def bind(self, binding: Binding, result: RunResult, *, continuation: bool = False) -> None:
        frames = result.frames
        ns = self.namespace
        if binding.out and frames:
            ns[binding.out] = frames[-1]
        elif binding.out and not continuation and result.status == "complete":
            ns[binding.out] = None
            print(f"-o {binding.out}: this run fetched no DataFrame; {binding.out} = None")
        if binding.out_all:
            earlier = ns.get(binding.out_all) if continuation else None
            ns[binding.out_all] = (list(earlier) if isinstance(earlier, list) else []) + frames
        if binding.result:
            ns[binding.result] = result

    def chat_send(self, agent: Agent, view: View, prompt: str) -> concurrent.futures.Future[Any]:
        """The chat widget's Send: runs without blocking the kernel."""
        tid = self.current.get(agent.name)
        context = self.context()

        async def go() -> RunResult:
            view.begin()
            try:
                result = await agent.run(
                    prompt, thread_id=tid, context=context, on_event=view.on_event
                )
            except BaseException as exc:
                self._finish(agent, view, getattr(exc, "result", None), exc)
                raise
            self._finish(agent, view, result, None)
            return result

        future = self._submit(go())
        view.future = future  # type: ignore[attr-defined]
        return future

    # ---- approvals ----------------------------------------------------------------------------

    def _resumer(self, agent: Agent) -> Any:
        def resume(view: Any, pending: PendingApproval, approve: bool | Resolution) -> Any:
            self._claim([pending.call_id])
            choice = Decision(approve, pending.digest) if isinstance(approve, bool) else approve
            decision: dict[str, DecisionLike] = {pending.call_id: choice}
            thread_id = view.thread_id
            if thread_id is None:
                raise UsageError("this card has no thread yet; wait for the run to stop")
            return self._submit(self._resume(agent, view, thread_id, decision, self.context()))

        return resume

    def _claim(self, call_ids: list[str]) -> None:
        with self._lock:
            done = [c for c in call_ids if c in self._decided]
            if done:
                raise UsageError(f"call {done[0]} was already decided; nothing runs twice")
            self._decided.update(call_ids)

    async def _resume(
        self,
        agent: Agent,
        view: View,
        thread_id: str,
        decisions: Mapping[str, DecisionLike],
        context: Mapping[str, Any] | None,
    ) -> RunResult:
        lock = self._thread_locks.setdefault(thread_id, asyncio.Lock())
        async with lock:
            view.begin()
            try:
                result = await agent.resume(
                    thread_id, decisions, context=context, on_event=view.on_event
                )
            except BaseException as exc:
                view.finish(getattr(exc, "result", None), exc)
                if isinstance(exc, UserError):  # e.g. the call was decided elsewhere
                    with self._lock:
                        self._decided.difference_update(decisions)
                raise
            view.finish(result, None)
            self.last_result = result
            binding = getattr(view, "binding", None)
            if binding is not None:
                self.bind(binding, result, continuation=True)
            return result

    def decide(self, call_ids: list[str], approve: bool | Resolution) -> RunResult:
        """``%loom approve/reject CALL_ID...`` (or ``%loom resolve CALL_ID CHOICE`` for a call
        whose outcome is unknown): decide and resume in this cell."""
        by_call = {p.call_id: (a, t, p) for a, t in self.pending() for p in t.pending}
        missing = [c for c in call_ids if c not in by_call]
        if missing:
            known = " ".join(by_call) or "none"
            raise UsageError(f"no call {missing[0]!r} waits for approval; waiting: {known}")
        threads = {by_call[c][1].id for c in call_ids}
        if len(threads) > 1:
            raise UsageError("these calls belong to different threads: decide one thread at a time")
        unknown = [c for c in call_ids if by_call[c][2].state == "unknown"]
        if isinstance(approve, bool) and unknown:
            raise UsageError(
                f"the outcome of call {unknown[0]} is unknown (its kernel stopped while it ran; "
                "the write may have happened): choose with %loom resolve "
                f"{unknown[0]} happened|retry|failed"
            )
        agent, thread, _ = by_call[call_ids[0]]
        self._claim(call_ids)
        verb = "resolve" if isinstance(approve, str) else "approve" if approve else "reject"
        for card_view in list(self._views):
            for card in getattr(card_view, "cards", []):
                if card.call_id in call_ids and card.decision is None:
                    card.mark(approve, f"decided with %loom {verb}")
        decisions: dict[str, DecisionLike] = {
            c: Decision(approve, by_call[c][2].digest) if isinstance(approve, bool) else approve
            for c in call_ids
        }
        view = self.make_view(agent)
        view.show()
        view.thread_id = thread.id
        try:
            result = self._run(self._resume(agent, view, thread.id, decisions, self.context()))
        except RunError as exc:
            raise RunFailed(f"{agent.name}: {exc}", result=exc.result) from None
        return result

    # ---- helpers ------------------------------------------------------------------------------

    def _submit(self, coro: Coroutine[Any, Any, RunResult]) -> concurrent.futures.Future[Any]:
        future = _loop_thread.submit(coro)
        with self._lock:
            self.futures = [f for f in self.futures if not f.done()] + [future]
        return future

    def _run(self, coro: Coroutine[Any, Any, RunResult]) -> RunResult:
        with usage_errors():
            return _loop_thread.run_sync(coro)

    def wait(self, timeout: float | None = None) -> None:
        """Block until every run started by a button or the chat has ended."""
        with self._lock:
            futures = list(self.futures)
        concurrent.futures.wait(futures, timeout)
