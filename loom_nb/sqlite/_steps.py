"""The SQLite store's writes that must happen as one step: appending a message, moving pending
calls through their lifecycle, taking and freeing a thread's lease.

Each function runs inside the caller's ``BEGIN IMMEDIATE`` transaction: SQLite's write lock
makes its read and its write one step, so a compare-and-set here is one for every process.
A ``Scope`` is (thread id, user id): another user's thread is one that does not exist.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection, Sequence
from datetime import datetime, timezone

from loom_nb._message_rows import lease_of, message_row, moved_pending, pending_text, sort_key
from loom_nb._messages import CallState, Lease, Message, PendingApproval
from loom_nb._store import check_update

Scope = tuple[str, str | None]
_SCOPED = "WHERE id = ? AND user_id IS ?"


def append(
    conn: sqlite3.Connection,
    thread_id: str,
    updated: datetime,
    message: Message,
    pending: Sequence[PendingApproval] | None,
    indexed: bool,
) -> None:
    """``Store.append``: the message, and with ``pending`` the thread's pending calls."""
    append_row(conn, thread_id, updated, message, indexed)
    if pending is not None:
        write_pending(conn, thread_id, pending_text(pending), len(pending))


def append_row(
    conn: sqlite3.Connection, thread_id: str, updated: datetime, message: Message, indexed: bool
) -> None:
    """Add one message row, count it on its thread, and (``indexed``) put its text in the
    search index."""
    _, _, text, data, search = message_row(message)  # role and created_at are in the JSON
    found = conn.execute(
        "UPDATE loom_threads SET message_count = message_count + 1, updated_at = ?, "
        "updated_us = ?, version = version + 1 WHERE id = ? RETURNING message_count",
        (updated.isoformat(), sort_key(updated), thread_id),
    ).fetchone()
    if found is None:
        raise KeyError(f"append to a thread that was never saved: {thread_id}")
    row = conn.execute(
        "INSERT INTO loom_messages (thread_id, seq, json, data) VALUES (?, ?, ?, ?)",
        (thread_id, found[0] - 1, text, data),
    ).lastrowid
    if indexed:
        conn.execute("INSERT INTO loom_search (rowid, text) VALUES (?, ?)", (row, search))


def write_pending(conn: sqlite3.Connection, thread_id: str, text: str, count: int) -> None:
    """Save the thread's pending list (its JSON text)."""
    conn.execute(
        "UPDATE loom_threads SET pending = ?, pending_count = ?, version = version + 1 "
        "WHERE id = ?",
        (text, count, thread_id),
    )


def move_calls(
    conn: sqlite3.Connection,
    scope: Scope,
    call_ids: Sequence[str],
    state: CallState,
    expect: Collection[CallState],
    holder: str | None,
    message: Message | None,
    indexed: bool,
) -> None:
    """``Store.update_calls``: check, move, and append the results, all or nothing."""
    check_update(state, message)
    thread_id = scope[0]
    found = conn.execute(f"SELECT pending FROM loom_threads {_SCOPED}", scope).fetchone()
    if found is None:
        raise KeyError(f"a thread that was never saved: {thread_id}")
    write_pending(
        conn, thread_id, *moved_pending(found[0], call_ids, state, expect, holder, message)
    )
    if message is not None:
        append_row(conn, thread_id, message.created_at, message, indexed)


#: Says whether a lease (holder, until, length in microseconds) lapsed: see ``Watch``.
Lapsed = Callable[[str, int, int | None], bool]


def take_lease(
    conn: sqlite3.Connection,
    scope: Scope,
    holder: str,
    seconds: float,
    replacing: str | None,
    lapsed: Lapsed,
) -> Lease:
    """``Store.acquire_lease``: the thread's lease after the attempt. Its ``until`` is written
    by the holder's clock and read only as a mark that changes with every renewal; whether
    another holder's lease lapsed is ``lapsed``'s to say."""
    found = conn.execute(
        f"SELECT lease_holder, lease_until_us, lease_us FROM loom_threads {_SCOPED}", scope
    ).fetchone()
    if found is None:
        raise KeyError(f"a thread that was never saved: {scope[0]}")
    stale = (None, None)
    other = found[0] is not None and found[0] not in (holder, replacing)
    if other and lapsed(found[0], found[1], found[2]):
        stale = (found[0], found[1])
    now = sort_key(datetime.now(timezone.utc))
    us = round(seconds * 1_000_000)
    conn.execute(
        # not a change of the thread's record: no version bump (a kept thread stays kept)
        f"UPDATE loom_threads SET lease_holder = ?, lease_until_us = ?, lease_us = ? {_SCOPED} "
        "AND (lease_holder IS NULL OR lease_holder IN (?, ?) "
        "OR (lease_holder = ? AND lease_until_us = ?))",
        (holder, now + us, us, *scope, holder, replacing, *stale),
    )
    found = conn.execute(
        f"SELECT lease_holder, lease_until_us FROM loom_threads {_SCOPED}", scope
    ).fetchone()
    if found is None:
        raise KeyError(f"a thread that was never saved: {scope[0]}")
    lease = lease_of(found[0], found[1])
    assert lease is not None  # the update above set one, or one stood in its way
    return lease


def free_lease(conn: sqlite3.Connection, scope: Scope, holder: str, error: str | None) -> bool:
    """``Store.release_lease``: True when ``holder`` held the thread."""
    return bool(
        conn.execute(
            "UPDATE loom_threads SET lease_holder = NULL, lease_until_us = NULL, error = ?, "
            f"version = version + 1 {_SCOPED} AND lease_holder = ?",
            (error, *scope, holder),
        ).rowcount
    )
