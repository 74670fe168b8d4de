"""The kernel-side state behind the magics: agents, the current thread per agent, the views.

What each ``%loom`` subcommand does lives in ``loom_nb.notebook.commands``; this module keeps
what they share: which agents and threads there are, which views are on screen, which calls
were decided, and the runs that buttons started.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import weakref
from collections.abc import Coroutine, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from IPython.core.error import UsageError

from loom_nb import _loop_thread
from loom_nb._agent import Agent, RunResult
from loom_nb._errors import RunError, ThreadNotFound, ThreadWaiting, UserError
from loom_nb._messages import Thread
from loom_nb._store import MemoryStore
from loom_nb.notebook._view import View


class Settings(Protocol):
    """The ``%config LoomMagics`` settings the session reads."""

    default_agent: str
    rows: int
    stream_interval: float
    display: str
    context: str


class RunFailed(RunError):
    """A ``%%loom`` run failed. Shown as one line, and stops "Run All"; when the user's own
    code raised (a model function), where it did follows, in the shell's ``%xmode``."""

    #: The user's exception that ended the run, if any.
    user_error: BaseException | None = None

    def _render_traceback_(self) -> list[str]:
        lines = [f"RunFailed: {self}"]
        if self.user_error is not None:
            from loom_nb.notebook._tracebacks import traceback_lines

            lines += traceback_lines(self.user_error, color=True)
        return lines


class RunInterrupted(RunFailed):
    """Ctrl-C (Kernel → Interrupt) stopped a run in a cell: one line saying what was stopped
    and what was kept, no traceback; "Run All" stops there."""

    def _render_traceback_(self) -> list[str]:
        return [f"KeyboardInterrupt: {self}"]


#: What a view says when a run was stopped and says nothing itself (a cancelled resume).
INTERRUPTED = "The run was interrupted; what completed is saved."


def interruption(error: BaseException | None) -> str | None:
    """The one line for a run stopped by Ctrl-C or a cancel; None for any other end."""
    if isinstance(error, RunInterrupted):
        return str(error)
    if isinstance(
        error, KeyboardInterrupt | asyncio.CancelledError | concurrent.futures.CancelledError
    ):
        return INTERRUPTED
    return None


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
    """One per IPython shell: what the ``%loom`` commands share between cells."""

    def __init__(self, shell: Any, settings: Settings) -> None:
        self.shell = shell
        self.settings = settings
        #: agent name -> the thread ``%%loom`` continues (None: the next run starts one).
        self.current: dict[str, str | None] = {}
        #: The agent of the last ``%%loom`` / ``%loom`` that named one (``%loom show``'s default).
        self.last_agent: str | None = None
        self.last_view: View | None = None
        #: The chat widget %loom AGENT showed last.
        self.last_chat: Any = None
        self.last_result: RunResult | None = None
        #: Runs started by buttons and the chat, not yet ended (``wait()`` waits for them).
        self.futures: list[concurrent.futures.Future[Any]] = []
        #: Every view still alive, so a call decided by ``%loom approve`` shows it on its card.
        self.views: weakref.WeakSet[View] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._decided: set[str] = set()
        self._thread_locks: dict[str, asyncio.Lock] = {}  # used on the loop thread only

    # ---- agents and threads ----------------------------------------------------------------

    @property
    def namespace(self) -> dict[str, Any]:
        """The user's variables."""
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
        """The agent in variable ``name``; with no name the default or the only one."""
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

    def current_thread(self, agent: Agent) -> str | None:
        """The agent's current thread, if its store still has it. If not (the defining cell
        ran again and made a new memory store, or the thread was deleted), a one-line note
        says so and the next run starts a new thread."""
        tid = self.current.get(agent.name)
        if tid is None:
            return None
        try:
            agent.check_thread(tid, context=self.context())
        except ThreadNotFound:
            self.lost_thread(agent, tid)
            return None
        except ThreadWaiting:
            pass  # it is there; its cards show what waits
        return tid

    def lost_thread(self, agent: Agent, tid: str) -> None:
        """The agent's current thread ``tid`` is gone from its store: a one-line note says
        why, and the next run starts a new thread."""
        self.current[agent.name] = None
        why = (
            "the agent was defined again and its memory store starts empty; keep threads "
            "with store=sqlite_store()"
            if isinstance(agent.store, MemoryStore)
            else "it was deleted, or the agent now uses another store"
        )
        gone = f"ℹ {agent.name}'s thread {tid} is no longer in its store"
        print(f"{gone} ({why}): starting a new thread.")

    def variable(self, agent: Agent) -> str:
        """The variable that holds ``agent`` (its name when none does), for hints."""
        return next((k for k, v in self.agents().items() if v is agent), agent.name)

    def unique_agents(self) -> list[Agent]:
        """One agent per (name, store): two variables for one agent list its threads once."""
        seen: dict[tuple[str, int], Agent] = {}
        for a in self.agents().values():
            seen.setdefault((a.name, id(a.store)), a)
        return list(seen.values())

    def find_thread(self, thread_id: str) -> tuple[Agent, Thread]:
        """The thread ``thread_id`` of whichever agent here has it."""
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

    def widgets_mode(self) -> bool:
        """Whether views are widgets (a Jupyter frontend) or text (terminal, scripts)."""
        mode = self.settings.display
        if mode != "auto":
            return mode == "widgets"
        if type(self.shell).__name__ == "TerminalInteractiveShell":
            return False
        return getattr(self.shell, "kernel", None) is not None

    # ---- decisions and background runs -------------------------------------------------------

    def claim(self, call_ids: Iterable[str]) -> None:
        """Take the one decision each call gets in this kernel; a second one is refused."""
        call_ids = list(call_ids)
        with self._lock:
            done = [c for c in call_ids if c in self._decided]
            if done:
                raise UsageError(
                    f"call {done[0]} is being decided in this kernel now (its run has not "
                    "ended); wait for it, then reload the thread with %loom show"
                )
            self._decided.update(call_ids)

    def release(self, call_ids: Iterable[str]) -> None:
        """Give the decisions back once their run ended (however it ended: from then on the
        store says where each call is)."""
        with self._lock:
            self._decided.difference_update(call_ids)

    def thread_lock(self, thread_id: str) -> asyncio.Lock:
        """The lock that resumes of one thread take in turn (on the private loop only)."""
        return self._thread_locks.setdefault(thread_id, asyncio.Lock())

    def submit(self, coro: Coroutine[Any, Any, RunResult]) -> concurrent.futures.Future[Any]:
        """Start ``coro`` on the private loop without waiting (buttons, the chat)."""
        future = _loop_thread.submit(coro)
        with self._lock:
            self.futures = [f for f in self.futures if not f.done()] + [future]
        return future

    def wait(self, timeout: float | None = None) -> None:
        """Block until every run started by a button or the chat has ended."""
        with self._lock:
            futures = list(self.futures)
        concurrent.futures.wait(futures, timeout)
