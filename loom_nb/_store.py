"""The store contract, and the in-memory store.

A store keeps thread records and their messages. The agent appends each message as it
completes (``append``) and saves the thread record when its title, pending approvals or error
change (``save_thread``), so a store never has to rewrite a whole thread.

Scoping: ``user_id`` is matched exactly. A thread of another user reads like one that does
not exist; threads made without ``auth`` have ``user_id=None``.
"""

from __future__ import annotations

import builtins
import copy
import itertools
import os
import threading
from typing import NamedTuple, Protocol, runtime_checkable

from loom_nb._messages import Message, Thread, ThreadInfo


@runtime_checkable
class Store(Protocol):
    """What the agent needs from a thread store: MemoryStore, SQLiteStore or your own."""

    def save_thread(self, thread: Thread) -> None:
        """Create or update the thread's record (not its messages)."""

    def append(self, thread: Thread, message: Message) -> None:
        """Durably add one completed message, and touch the thread's ``updated_at``."""

    def load(self, thread_id: str, *, user_id: str | None = None) -> Thread | None:
        """The thread with all its messages, or None when the id is unknown to this user."""

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
    """A store that can say cheaply whether a thread changed (SQLiteStore, MemoryStore): the
    agent then keeps the threads it runs in memory instead of loading them for every turn."""

    def thread_version(
        self, thread_id: str, *, user_id: str | None = None
    ) -> ThreadVersion | None: ...


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


class MemoryStore(Store):
    """Threads in this process's memory: fine for tests; lost when the process ends."""

    def __init__(self) -> None:
        self._threads: dict[str, Thread] = {}
        self._lock = threading.Lock()
        #: The number of the last write to each thread (from one count: a thread deleted and
        #: made again does not repeat a number).
        self._changes: dict[str, int] = {}
        self._count = itertools.count(1)

    def save_thread(self, thread: Thread) -> None:
        with self._lock:
            saved = self._threads.get(thread.id)
            record = copy.copy(thread)
            record.pending = list(thread.pending)
            record.messages = saved.messages if saved else []
            self._threads[thread.id] = record
            self._changes[thread.id] = next(self._count)

    def append(self, thread: Thread, message: Message) -> None:
        with self._lock:
            saved = self._threads.get(thread.id)
            if saved is None:
                raise KeyError(f"append to a thread that was never saved: {thread.id}")
            saved.messages.append(message)
            saved.updated_at = thread.updated_at
            self._changes[thread.id] = next(self._count)

    def load(self, thread_id: str, *, user_id: str | None = None) -> Thread | None:
        with self._lock:
            saved = self._threads.get(thread_id)
            if saved is None or saved.user_id != user_id:
                return None
            thread = copy.copy(saved)
            thread.messages = list(saved.messages)
            thread.pending = list(saved.pending)
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

    def close(self) -> None:
        self._threads.clear()
        self._changes.clear()

    def describe(self) -> str:
        """Where this store keeps threads, for ``%loom threads``."""
        return "memory (lost when the kernel stops)"


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
    notebook, which is the kernel's working folder).

    ``LOOM_STORE`` is a SQLite file path, a ``sqlite:///relative/path`` or
    ``sqlite:////absolute/path`` URL, or a ``postgresql://`` URL (so a hub admin sets it once
    for every user). Agents defined with the same setting share one store (one connection).
    """
    spec = os.environ.get(STORE_VARIABLE, "").strip()
    kind, target = _parse_store_spec(spec)
    key = f"{kind}:{os.path.abspath(target) if kind == 'sqlite' else target}"
    with _defaults_lock:
        found = _defaults.get(key)
        if found is not None and not getattr(found, "_closed", False):
            return found
        if kind == "postgresql":
            from loom_nb.postgres import postgres_store

            store: Store = postgres_store(target)
        else:
            from loom_nb.sqlite import sqlite_store

            store = sqlite_store(target)
        _defaults[key] = store
        return store


def _parse_store_spec(spec: str) -> tuple[str, str]:
    from loom_nb._errors import UserError

    if not spec:
        from loom_nb.sqlite import DEFAULT_PATH

        return "sqlite", DEFAULT_PATH
    scheme, sep, rest = spec.partition("://")
    if not sep:
        return "sqlite", os.path.expanduser(spec)
    if scheme in ("postgresql", "postgres"):
        return "postgresql", spec
    if scheme == "sqlite" and rest.startswith("/") and len(rest) > 1:
        return "sqlite", rest[1:]  # sqlite:///a.db is a.db; sqlite:////abs/a.db is /abs/a.db
    raise UserError(
        f"{STORE_VARIABLE}={spec!r} names no store loom_nb knows; set it to a SQLite file path "
        "(or sqlite:///path/to/loom.db) or a postgresql://USER:PASSWORD@HOST/DATABASE URL"
    )


def describe(store: Store) -> str:
    """A short line saying where ``store`` keeps threads (its ``describe()``, when it has one)."""
    described = getattr(store, "describe", None)
    return str(described()) if callable(described) else type(store).__name__
