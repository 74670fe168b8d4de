"""The store contract, and the in-memory store.

A store keeps thread records and their messages. The agent creates a thread's record
(``save_thread``) and appends each message as it completes (``append``), so a store never has
to rewrite a whole thread.

Runs across processes meet in the store, so three things are compare-and-set there, each one
transaction:

- the thread's **lease** (``acquire_lease`` / ``release_lease``): one run per thread at a time;
- each **call that needs approval** (``update_calls``): pending -> approved / rejected ->
  running (claimed by one run) -> done (its result saved) | unknown. Of any number of kernels
  that decide or claim one call, exactly one succeeds; the others get
  :class:`~loom_nb.CallAlreadyDecided`;
- an **approval request**: the assistant message that asks for it and its pending calls, with
  their previews, are saved together (``append(..., pending=...)``), so no kill leaves a call
  without its card.

Scoping: ``user_id`` is matched exactly. A thread of another user reads like one that does
not exist; threads made without ``auth`` have ``user_id=None``.
"""

from __future__ import annotations

import builtins
import copy
import itertools
import os
import re
import threading
from collections.abc import Collection, Sequence
from datetime import datetime, timedelta, timezone
from typing import NamedTuple, Protocol, TypeGuard, runtime_checkable

from loom_nb import _compose
from loom_nb._errors import CallAlreadyDecided
from loom_nb._messages import (
    CallState,
    Lease,
    Message,
    PendingApproval,
    Thread,
    ThreadInfo,
    shallow_copy,
)
from loom_nb._rules import Rule

#: How long a run's lease on its thread lasts without renewal (a holder that died).
LEASE_SECONDS = 30.0


@runtime_checkable
class Store(Protocol):
    """What the agent needs from a thread store: MemoryStore, SQLiteStore or your own."""

    def save_thread(self, thread: Thread) -> None:
        """Create or update the thread's record (not its messages): agent, user, title,
        timestamps, error and the pending calls as given. The agent calls it to create a
        thread; afterwards pending calls change only through ``append(..., pending=...)`` and
        ``update_calls``, so a stale copy of a thread never undoes a decision made elsewhere."""

    def append(
        self, thread: Thread, message: Message, *, pending: Sequence[PendingApproval] | None = None
    ) -> None:
        """Durably add one completed message, and touch the thread's ``updated_at``.

        With ``pending``, the thread's pending calls become exactly these, in the same
        transaction: an approval request is saved with its cards, or not at all.
        """

    def update_calls(
        self,
        thread_id: str,
        call_ids: Sequence[str],
        state: CallState,
        *,
        expect: Collection[CallState],
        holder: str | None = None,
        message: Message | None = None,
        user_id: str | None = None,
    ) -> None:
        """Move pending calls to ``state``, compare-and-set, in one transaction.

        Every call in ``call_ids`` must be in the thread's pending list in a state in
        ``expect``; a call that is ``running`` matches only when ``holder`` is its holder
        (``holder=None`` matches any: a run that took the thread over marks its dead
        predecessor's calls ``unknown``). Otherwise nothing changes and
        :class:`~loom_nb.CallAlreadyDecided` names the first call that did not match (its
        state is "done" when it is no longer pending).

        Moving to ``running`` records ``holder`` on the calls. ``state="done"`` needs
        ``message``, the tool message with their results: it is appended (as ``append``
        does) and the calls leave the pending list, in the same transaction.

        ``user_id`` scopes like ``load``'s (and these methods' below): another user's thread is
        one that does not exist (``KeyError``, as for a thread never saved).
        """

    def acquire_lease(
        self,
        thread_id: str,
        holder: str,
        seconds: float,
        *,
        replacing: str | None = None,
        user_id: str | None = None,
    ) -> Lease:
        """Hold the thread for ``seconds`` from now, compare-and-set, in one transaction.

        It succeeds when nobody holds the thread, the lease has expired (by the store's clock:
        one clock for every kernel), ``holder`` holds it (a renewal), or ``replacing`` holds it
        (a holder found dead). Returns the thread's lease after the attempt: ``holder``'s when
        it succeeded, else the one in the way.
        """

    def release_lease(
        self, thread_id: str, holder: str, *, error: str | None, user_id: str | None = None
    ) -> bool:
        """End a run: if ``holder`` holds the thread, free it and record ``error`` (None: the
        run ended well) as the thread's error, in one transaction. False when it did not
        hold it (its lease lapsed and another run took the thread: nothing is written)."""

    def load(self, thread_id: str, *, user_id: str | None = None) -> Thread | None:
        """The thread with all its messages and its lease, or None when the id is unknown to
        this user. The lease says whether the store, by its clock, found it lapsed."""

    def list(
        self,
        *,
        agent: str | None = None,
        user_id: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> builtins.list[ThreadInfo]:
        """Threads, most recently updated first."""

    def search(
        self, text: str, *, agent: str | None = None, user_id: str | None = None, limit: int = 50
    ) -> builtins.list[ThreadInfo]:
        """Threads with a message containing ``text`` (case-insensitive), newest first."""

    def delete(self, thread_id: str, *, user_id: str | None = None) -> bool:
        """Remove a thread and its messages; False when the id is unknown to this user."""

    def close(self) -> None:
        """Release files and connections."""


class ThreadVersion(NamedTuple):
    """Where a saved thread stands: a counter every write to it bumps, and its messages."""

    changes: int
    messages: int


@runtime_checkable
class VersionedStore(Protocol):
    """A store that can say cheaply whether a thread changed (every store loom_nb ships): the
    agent then keeps the threads it runs in memory instead of loading them for every turn."""

    def thread_version(
        self, thread_id: str, *, user_id: str | None = None
    ) -> ThreadVersion | None: ...


@runtime_checkable
class LeasedWrites(Protocol):
    """A store whose writes can carry a run's lease (every store loom_nb ships), so a run
    spends no transaction of its own on it: a new thread is made held, with its first
    message, and a run's last message frees the thread. With other stores the run takes and
    frees the lease in transactions of their own (``acquire_lease`` / ``release_lease``)."""

    def start(self, thread: Thread, message: Message, *, holder: str, seconds: float) -> None:
        """Create the new ``thread`` (its record, as ``save_thread`` writes it) held by
        ``holder`` for ``seconds`` from now, with ``message`` appended: one transaction, so
        a kill leaves the thread with all three or no thread at all. ``ValueError`` (nothing
        written) when the id exists already."""

    def finish(self, thread: Thread, message: Message, *, holder: str) -> bool:
        """Append ``message`` (as ``append`` does) and, when ``holder`` holds the thread, free
        it as ``release_lease(error=None)`` does: one transaction. True when it was freed
        (False: the lease lapsed and another run took it; the message is saved all the same,
        as ``append`` would save it)."""


_LEASED_WRITES: dict[type, bool] = {}


def leased_writes(store: object) -> TypeGuard[LeasedWrites]:
    """``isinstance(store, LeasedWrites)``, judged once per store class (a protocol check reads
    every method's name: costly on each write of a run)."""
    kind = type(store)
    found = _LEASED_WRITES.get(kind)
    if found is None:
        found = _LEASED_WRITES[kind] = isinstance(store, LeasedWrites)
    return found


def info_of(thread: Thread) -> ThreadInfo:
    return ThreadInfo(
        id=thread.id,
        agent=thread.agent,
        user_id=thread.user_id,
        title=thread.title,
        created_at=thread.created_at,
        updated_at=thread.updated_at,
        message_count=len(thread.messages),
        pending_count=len(thread.pending),
    )


class MemoryStore(Store, LeasedWrites):
    """Threads in this process's memory: fine for tests; lost when the process ends."""

    def __init__(self) -> None:
        self._threads: dict[str, Thread] = {}
        self._lock = threading.RLock()  # start and finish are other writes in one step
        #: The number of the last write to each thread (from one count: a thread deleted and
        #: made again does not repeat a number).
        self._changes: dict[str, int] = {}
        self._count = itertools.count(1)
        self._rules: dict[str, Rule] = {}
        #: (agent, user) -> suite -> thread ids, as added (``loom_nb._eval.SuiteStore``).
        self._suites: dict[tuple[str, str | None], dict[str, builtins.list[str]]] = {}

    def save_thread(self, thread: Thread) -> None:
        with self._lock:
            saved = self._threads.get(thread.id)
            record = shallow_copy(thread)
            record.pending = [shallow_copy(p) for p in thread.pending]
            record.messages = saved.messages if saved else []
            record.lease = saved.lease if saved else None
            self._threads[thread.id] = record
            self._changes[thread.id] = next(self._count)

    def append(
        self, thread: Thread, message: Message, *, pending: Sequence[PendingApproval] | None = None
    ) -> None:
        with self._lock:
            saved = self._saved(thread.id, any_user=True)  # the thread says whose it is
            saved.messages.append(message)
            saved.updated_at = thread.updated_at
            if pending is not None:
                saved.pending = [shallow_copy(p) for p in pending]
            self._changes[thread.id] = next(self._count)

    def start(self, thread: Thread, message: Message, *, holder: str, seconds: float) -> None:
        """Create ``thread`` held by ``holder``, with ``message`` (see :class:`LeasedWrites`)."""
        with self._lock:
            if thread.id in self._threads:
                raise ValueError(f"a thread with id {thread.id} exists already")
            self.save_thread(thread)
            saved = self._threads[thread.id]
            saved.lease = Lease(holder, datetime.now(timezone.utc) + timedelta(seconds=seconds))
            self.append(thread, message)

    def finish(self, thread: Thread, message: Message, *, holder: str) -> bool:
        """Append the run's last ``message`` and free ``holder``'s lease (see
        :class:`LeasedWrites`)."""
        with self._lock:
            self.append(thread, message)
            return self.release_lease(thread.id, holder, error=None, user_id=thread.user_id)

    def update_calls(
        self,
        thread_id: str,
        call_ids: Sequence[str],
        state: CallState,
        *,
        expect: Collection[CallState],
        holder: str | None = None,
        message: Message | None = None,
        user_id: str | None = None,
    ) -> None:
        check_update(state, message)
        with self._lock:
            saved = self._saved(thread_id, user_id)
            saved.pending = moved(saved.pending, call_ids, state, expect, holder, message)
            if message is not None:
                saved.messages.append(message)
                saved.updated_at = message.created_at
            self._changes[thread_id] = next(self._count)

    def acquire_lease(
        self,
        thread_id: str,
        holder: str,
        seconds: float,
        *,
        replacing: str | None = None,
        user_id: str | None = None,
    ) -> Lease:
        with self._lock:
            saved = self._saved(thread_id, user_id)
            now = datetime.now(timezone.utc)
            lease = saved.lease
            if lease is None or lease.expires_at <= now or lease.holder in (holder, replacing):
                lease = saved.lease = Lease(holder, now + timedelta(seconds=seconds))
            return lease

    def release_lease(
        self, thread_id: str, holder: str, *, error: str | None, user_id: str | None = None
    ) -> bool:
        with self._lock:
            saved = self._threads.get(thread_id)
            if saved is None or saved.user_id != user_id:
                return False
            if saved.lease is None or saved.lease.holder != holder:
                return False
            saved.lease = None
            saved.error = error
            self._changes[thread_id] = next(self._count)
            return True

    def load(self, thread_id: str, *, user_id: str | None = None) -> Thread | None:
        with self._lock:
            saved = self._threads.get(thread_id)
            if saved is None or saved.user_id != user_id:
                return None
            thread = copy.copy(saved)
            lease = saved.lease  # one process, one clock: this one
            if lease is not None:
                lapsed = lease.expires_at <= datetime.now(timezone.utc)
                thread.lease = Lease(lease.holder, lease.expires_at, lapsed)
            thread.messages = list(saved.messages)
            thread.pending = [copy.copy(p) for p in saved.pending]
            return thread

    def list(
        self,
        *,
        agent: str | None = None,
        user_id: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> builtins.list[ThreadInfo]:
        with self._lock:
            found = [
                t
                for t in self._threads.values()
                if t.user_id == user_id and (agent is None or t.agent == agent)
            ]
        found.sort(key=lambda t: t.updated_at, reverse=True)
        return [info_of(t) for t in found[offset : offset + limit]]

    def search(
        self, text: str, *, agent: str | None = None, user_id: str | None = None, limit: int = 50
    ) -> builtins.list[ThreadInfo]:
        needle = text.casefold()
        hits = [
            info
            for info in self.list(agent=agent, user_id=user_id, limit=len(self._threads))
            if any(needle in _searchable(m) for m in self._threads[info.id].messages)
        ]
        return hits[:limit]

    def delete(self, thread_id: str, *, user_id: str | None = None) -> bool:
        with self._lock:
            saved = self._threads.get(thread_id)
            if saved is None or saved.user_id != user_id:
                return False
            del self._threads[thread_id]
            del self._changes[thread_id]
            return True

    def thread_version(self, thread_id: str, *, user_id: str | None = None) -> ThreadVersion | None:
        """The number of the thread's last write and its message count (None when unknown)."""
        with self._lock:
            saved = self._threads.get(thread_id)
            if saved is None or saved.user_id != user_id:
                return None
            return ThreadVersion(self._changes[thread_id], len(saved.messages))

    def save_rule(self, rule: Rule) -> None:
        """Keep ``rule`` (see :class:`loom_nb._rules.RuleStore`)."""
        with self._lock:
            self._rules[rule.id] = Rule.from_dict(rule.to_dict())

    def load_rules(self, agent: str, *, user_id: str | None = None) -> builtins.list[Rule]:
        """The agent's rules for this user that are not revoked, oldest first."""
        with self._lock:
            return [
                Rule.from_dict(r.to_dict(), store=self)
                for r in self._rules.values()
                if r.agent == agent and r.user_id == user_id and r.revoked_at is None
            ]

    def revoke_rule(self, rule_id: str, *, user_id: str | None = None) -> bool:
        """Revoke a rule once; False when it was revoked already or is not this user's."""
        with self._lock:
            rule = self._rules.get(rule_id)
            if rule is None or rule.user_id != user_id or rule.revoked_at is not None:
                return False
            rule.revoked_at = datetime.now(timezone.utc)
            return True

    def add_to_suite(
        self, agent: str, suite: str, thread_ids: Sequence[str], *, user_id: str | None = None
    ) -> None:
        """Add threads to an eval suite (see ``loom_nb._eval.SuiteStore``)."""
        with self._lock:
            kept = self._suites.setdefault((agent, user_id), {}).setdefault(suite, [])
            kept.extend(t for t in dict.fromkeys(thread_ids) if t not in kept)

    def load_suites(
        self, agent: str, *, user_id: str | None = None
    ) -> dict[str, builtins.list[str]]:
        """The agent's eval suites for this user, with their thread ids as added."""
        with self._lock:
            found = self._suites.get((agent, user_id), {})
            return {name: list(ids) for name, ids in found.items()}

    def close(self) -> None:
        self._threads.clear()
        self._changes.clear()
        self._rules.clear()
        self._suites.clear()

    def describe(self) -> str:
        """Where this store keeps threads, for ``%loom threads``."""
        return "memory (lost when the kernel stops)"

    def _saved(
        self, thread_id: str, user_id: str | None = None, *, any_user: bool = False
    ) -> Thread:
        saved = self._threads.get(thread_id)
        if saved is None or (saved.user_id != user_id and not any_user):
            raise KeyError(f"a thread that was never saved: {thread_id}")
        return saved


# ---- the call lifecycle, shared by the stores that keep pending calls as one list ----------------


def check_update(state: CallState, message: Message | None) -> None:
    """``update_calls``'s rule: a result message and the state ``done`` go together."""
    if (state == "done") != (message is not None):
        raise ValueError("update_calls: state 'done' goes with the message holding the results")


def moved(
    pending: Sequence[PendingApproval],
    call_ids: Sequence[str],
    state: CallState,
    expect: Collection[CallState],
    holder: str | None,
    message: Message | None,
) -> builtins.list[PendingApproval]:
    """``pending`` after the compare-and-set of ``update_calls`` (new values; ``pending`` is
    left as it was). Raises :class:`CallAlreadyDecided` when a call does not match."""
    by_id = {p.call_id: p for p in pending}
    for call_id in call_ids:
        found = by_id.get(call_id)
        if found is None:
            raise CallAlreadyDecided(call_id, "done")
        if found.state not in expect or (
            found.state == "running" and holder is not None and found.holder != holder
        ):
            raise CallAlreadyDecided(call_id, found.state)
    out = []
    for p in pending:
        if p.call_id not in call_ids:
            out.append(copy.copy(p))
        elif message is None:  # "done" calls leave the list: their results are in the thread
            changed = copy.copy(p)
            changed.state = state
            if state == "running":
                changed.holder = holder
            out.append(changed)
    return out


def _searchable(message: Message) -> str:
    texts = [message.text] + [r.content for r in message.tool_results]
    return "\n".join(texts).casefold()


def memory_store() -> MemoryStore:
    """A store that keeps threads in memory (for tests and throwaway sessions)."""
    return MemoryStore()


# ---- the default store --------------------------------------------------------------------------

#: The environment variable naming the store agents use when ``define_agent`` gets no ``store=``.
STORE_VARIABLE = "LOOM_STORE"

_defaults: dict[str, Store] = {}
_defaults_lock = threading.Lock()


def store_from_env() -> Store:
    """The store named by ``LOOM_STORE``, else ``sqlite_store()`` (``.loom/loom.db`` beside the
    notebook, which is the kernel's working folder). The composition root (``_compose``)
    opens it: the core names no store of its own.

    ``LOOM_STORE`` is a SQLite file path, a ``sqlite:///relative/path`` or
    ``sqlite:////absolute/path`` URL, or what ``postgres_store`` reads: a ``postgresql://`` URL
    or libpq's ``host=... dbname=...`` keyword form (so a hub admin sets it once for every
    user). Anything else is a :class:`~loom_nb.UserError`, never a file. Agents defined with
    the same setting share one store (one connection).
    """
    spec = os.environ.get(STORE_VARIABLE, "").strip()
    kind, target = _parse_store_spec(spec)
    key = f"{kind}:{os.path.abspath(target) if kind == 'sqlite' else target}"
    with _defaults_lock:
        found = _defaults.get(key)
        if found is not None and not getattr(found, "_closed", False):
            return found
        store: Store = _compose.open_store(kind, target)
        _defaults[key] = store
        return store


# libpq's keyword form starts with a keyword and "=" ("host=db dbname=x", "dbname = x")
_KEYWORD_FORM = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\s*=")
# "postgresql:/x", "sqlite:a.db": a scheme that is not one of the URLs above (one letter and a
# colon is a Windows drive, a path)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:")
_FORMS = (
    "a SQLite file path (or sqlite:///relative/path.db, sqlite:////absolute/path.db), a "
    "postgresql://USER:PASSWORD@HOST:5432/DATABASE URL, or libpq's keyword form "
    "host=HOST port=5432 dbname=DATABASE user=USER password=PASSWORD"
)


def _parse_store_spec(spec: str) -> tuple[str, str]:
    if not spec:
        return "sqlite", _compose.default_sqlite_path()
    scheme, sep, rest = spec.partition("://")
    if sep:
        if scheme in ("postgresql", "postgres"):
            return "postgresql", spec
        if scheme == "sqlite" and rest.startswith("/") and len(rest) > 1:
            return "sqlite", rest[1:]  # sqlite:///a.db is a.db; sqlite:////abs/a.db is /abs/a.db
    elif _KEYWORD_FORM.match(spec):
        _check_keywords(spec)
        return "postgresql", spec
    elif not _SCHEME.match(spec):
        return "sqlite", os.path.expanduser(spec)
    raise _unreadable(spec)


def _check_keywords(spec: str) -> None:
    """libpq's own parser reads the keyword form, as postgres_store will (without psycopg,
    postgres_store says which extra to install)."""
    try:
        from psycopg import ProgrammingError
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        return
    try:
        conninfo_to_dict(spec)
    except ProgrammingError:
        # neither the setting nor libpq's reason is shown: either may hold a piece of a password
        raise _unreadable(None) from None


def _unreadable(spec: str | None) -> Exception:
    from loom_nb._errors import UserError

    if spec is None:
        said = f"{STORE_VARIABLE} is not keyword=value pairs libpq reads"
    else:
        hidden = re.sub(r"(://[^/@:]*:)[^@/]*@", r"\1***@", spec)  # a URL's password
        said = f"{STORE_VARIABLE}={hidden!r} names no store loom_nb knows"
    return UserError(
        f"{said}; set it to {_FORMS} (a file whose name holds '=' or ':' is written ./name)"
    )


def describe(store: Store) -> str:
    """A short line saying where ``store`` keeps threads (its ``describe()``, when it has one)."""
    described = getattr(store, "describe", None)
    return str(described()) if callable(described) else type(store).__name__
