"""The SQL stores' writes, each written once over a :class:`Dialect`: saving a thread,
appending a message, moving pending calls through their lifecycle, taking and freeing a
thread's lease, and the two writes a run's lease rides on (a new thread made held with its
first message, a run's last message freeing it).

Each step runs inside the caller's transaction, and a step that decides reads the thread's
row held for that transaction (``Dialect.lock``), so its read, its decision and its write are
one compare-and-set for every process. A ``Scope`` is (thread id, user id): another user's
thread is one that does not exist.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from loom_nb._messages import CallState, Lease, Message, PendingApproval, Thread
from loom_nb._sql_stores.rows import lease_of, moved_pending, pending_text, thread_row

Scope = tuple[str, str | None]

#: A ``sqlite3`` or ``psycopg`` connection: both run ``execute(sql, params)``.
Connection = Any

#: What saving a thread writes, in :func:`~loom_nb._sql_stores.rows.thread_row`'s order.
_SAVED = (
    "id",
    "agent",
    "user_id",
    "title",
    "created_at",
    "updated_at",
    "updated_us",
    "pending",
    "pending_count",
    "error",
)


class Dialect(ABC):
    """What one SQL store writes its way; the steps below are the same for every store."""

    #: The threads table, as the store's statements name it.
    threads: str
    #: The column every write to a thread bumps (a lease taken or renewed does not).
    changes: str
    #: SQL for now, in microseconds since the epoch: a new thread's first count of changes,
    #: and the mark a taken lease keeps.
    clock: str
    #: What a read adds to hold the thread's row until the transaction ends.
    lock: str
    #: What a take reads besides the holder and its mark, for :meth:`lapsed`.
    lapse: str
    #: The column a taken lease keeps its length in, if the dialect keeps it (None: not).
    length_column: str | None

    @abstractmethod
    def param(self, name: str) -> str:
        """The placeholder of the parameter ``name``."""

    @abstractmethod
    def lapsed(self, holder: str, until: int, lapse: Any) -> bool:
        """Whether another holder's lease lapsed, from its row (``lapse`` is :attr:`lapse`)."""

    @abstractmethod
    def add_message(
        self, conn: Connection, thread_id: str, updated: datetime, message: Message
    ) -> bool:
        """Add one message row and count it on its thread (one more message, updated at
        ``updated``, one more change); False when the thread was never saved."""


def save_thread(conn: Connection, d: Dialect, thread: Thread) -> None:
    """``Store.save_thread``: the thread's row, made or replaced. A thread made again after a
    deletion never repeats a count of changes its old self had: it starts at the clock."""
    names = ", ".join(_SAVED)
    values = ", ".join(d.param(n) for n in _SAVED)
    replaced = ", ".join(f"{n} = excluded.{n}" for n in _SAVED[1:])
    conn.execute(
        f"INSERT INTO {d.threads} AS t ({names}, {d.changes}) VALUES ({values}, {d.clock}) "
        f"ON CONFLICT (id) DO UPDATE SET {replaced}, {d.changes} = t.{d.changes} + 1",
        dict(zip(_SAVED, thread_row(thread), strict=True)),
    )


def start_thread(
    conn: Connection, d: Dialect, thread: Thread, message: Message, holder: str, seconds: float
) -> None:
    """``LeasedWrites.start``: a new thread's row, held by ``holder``, and its first message.
    An id that exists already is a ``ValueError`` (the transaction then writes nothing)."""
    names = ", ".join(_SAVED)
    values = ", ".join(d.param(n) for n in _SAVED)
    p = d.param
    params = dict(zip(_SAVED, thread_row(thread), strict=True))
    params.update(holder=holder, us=round(seconds * 1_000_000))
    length = (f", {d.length_column}", f", {p('us')}") if d.length_column else ("", "")
    made = conn.execute(
        f"INSERT INTO {d.threads} ({names}, {d.changes}, lease_holder, lease_until_us{length[0]})"
        f" VALUES ({values}, {d.clock}, {p('holder')}, {d.clock} + {p('us')}{length[1]})"
        " ON CONFLICT (id) DO NOTHING RETURNING id",
        params,
    ).fetchone()
    if made is None:
        raise ValueError(f"a thread with id {thread.id} exists already")
    append_row(conn, d, thread.id, thread.updated_at, message)


def finish(conn: Connection, d: Dialect, thread: Thread, message: Message, holder: str) -> bool:
    """``LeasedWrites.finish``: the run's last message, and its lease freed (the thread's
    error cleared) when ``holder`` still holds it; True when it did."""
    append_row(conn, d, thread.id, thread.updated_at, message)
    return free_lease(conn, d, (thread.id, thread.user_id), holder, None)


def append(
    conn: Connection,
    d: Dialect,
    thread_id: str,
    updated: datetime,
    message: Message,
    pending: Sequence[PendingApproval] | None,
) -> None:
    """``Store.append``: the message, and with ``pending`` the thread's pending calls."""
    append_row(conn, d, thread_id, updated, message)
    if pending is not None:
        write_pending(conn, d, thread_id, pending_text(pending), len(pending))


def append_row(
    conn: Connection, d: Dialect, thread_id: str, updated: datetime, message: Message
) -> None:
    """One message row, counted on its thread."""
    if not d.add_message(conn, thread_id, updated, message):
        raise KeyError(f"append to a thread that was never saved: {thread_id}")


def write_pending(conn: Connection, d: Dialect, thread_id: str, text: str, count: int) -> None:
    """Save the thread's pending list (its JSON text)."""
    p = d.param
    conn.execute(
        f"UPDATE {d.threads} SET pending = {p('pending')}, pending_count = {p('count')}, "
        f"{d.changes} = {d.changes} + 1 WHERE id = {p('id')}",
        {"pending": text, "count": count, "id": thread_id},
    )


def move_calls(
    conn: Connection,
    d: Dialect,
    scope: Scope,
    call_ids: Sequence[str],
    state: CallState,
    expect: Collection[CallState],
    holder: str | None,
    message: Message | None,
) -> None:
    """``Store.update_calls`` (its arguments checked by ``check_update``): check, move, and
    append the results, all or nothing."""
    found = conn.execute(
        f"SELECT pending FROM {d.threads} WHERE {owner(d, scope[1])}{d.lock}", _params(scope)
    ).fetchone()
    if found is None:
        raise KeyError(f"a thread that was never saved: {scope[0]}")
    moved = moved_pending(found[0], call_ids, state, expect, holder, message)
    write_pending(conn, d, scope[0], *moved)
    if message is not None:
        append_row(conn, d, scope[0], message.created_at, message)


def take_lease(
    conn: Connection,
    d: Dialect,
    scope: Scope,
    holder: str,
    seconds: float,
    replacing: str | None,
) -> Lease:
    """``Store.acquire_lease``: the thread's lease after the attempt. ``holder`` takes it when
    it is free, already its own or ``replacing``'s, or another's that lapsed (the dialect's
    clock says); otherwise the other holder's lease is the answer."""
    where = owner(d, scope[1])
    params = _params(scope, holder=holder, us=round(seconds * 1_000_000))
    found = conn.execute(
        f"SELECT lease_holder, lease_until_us, {d.lapse} FROM {d.threads} WHERE {where}{d.lock}",
        params,
    ).fetchone()
    if found is None:
        raise KeyError(f"a thread that was never saved: {scope[0]}")
    other = found[0] is not None and found[0] not in (holder, replacing)
    if not other or d.lapsed(*found):
        p = d.param
        length = f", {d.length_column} = {p('us')}" if d.length_column else ""
        found = conn.execute(
            # not a change of the thread's record: no change counted (a kept thread stays kept)
            f"UPDATE {d.threads} SET lease_holder = {p('holder')}, "
            f"lease_until_us = {d.clock} + {p('us')}{length} WHERE {where} "
            "RETURNING lease_holder, lease_until_us",
            params,
        ).fetchone()
    lease = lease_of(found[0], found[1])
    assert lease is not None  # the update above set one, or one stood in its way
    return lease


def free_lease(conn: Connection, d: Dialect, scope: Scope, holder: str, error: str | None) -> bool:
    """``Store.release_lease``: True when ``holder`` held the thread."""
    p = d.param
    return bool(
        conn.execute(
            f"UPDATE {d.threads} SET lease_holder = NULL, lease_until_us = NULL, "
            f"error = {p('error')}, {d.changes} = {d.changes} + 1 "
            f"WHERE {owner(d, scope[1])} AND lease_holder = {p('holder')}",
            _params(scope, holder=holder, error=error),
        ).rowcount
    )


def owner(d: Dialect, user_id: str | None, *, thread: bool = True) -> str:
    """The WHERE part of one user's thread (``thread``) or threads: the user ``=`` or
    ``IS NULL``, both indexed; its parameters are ``id`` and ``user``."""
    user = "user_id IS NULL" if user_id is None else f"user_id = {d.param('user')}"
    return f"id = {d.param('id')} AND {user}" if thread else user


def _params(scope: Scope, **more: Any) -> dict[str, Any]:
    return {"id": scope[0], "user": scope[1], **more}
