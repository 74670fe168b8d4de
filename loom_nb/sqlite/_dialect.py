"""How the SQLite store writes the steps of ``loom_nb._sql_stores.steps``, and its clock.

Each step runs inside the caller's ``BEGIN IMMEDIATE`` transaction: SQLite's write lock on
the file holds every row until it ends, so a read needs no lock of its own. Leases are told
lapsed by :class:`Watch`, this process's watch, not by comparing clocks.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from datetime import datetime
from typing import Any

from loom_nb._messages import Message
from loom_nb._sql_stores.rows import message_row, sort_key
from loom_nb._sql_stores.steps import Dialect
from loom_nb._store import LEASE_SECONDS


def now_us() -> int:
    """SQL ``loom_now_us()``: this process's clock, in microseconds since the epoch."""
    return time.time_ns() // 1000


class SQLiteDialect(Dialect):
    """The SQLite store's tables (prefixed ``loom_``), ``:name`` placeholders, and its watch
    for leases; ``indexed``: the file has the search index, which each message goes into."""

    threads = "loom_threads"
    changes = "version"
    clock = "loom_now_us()"
    lock = ""  # BEGIN IMMEDIATE holds the file's write lock for the whole transaction
    lapse = "lease_us"  # the lease's length, which the watch waits out
    length_column = "lease_us"

    def __init__(self, watch: Watch, indexed: bool) -> None:
        self.watch = watch
        self.indexed = indexed

    def param(self, name: str) -> str:
        return f":{name}"

    def lapsed(self, holder: str, until: int, lapse: Any) -> bool:
        return self.watch.lapsed(holder, until, lapse)

    def add_message(
        self, conn: sqlite3.Connection, thread_id: str, updated: datetime, message: Message
    ) -> bool:
        _, _, text, data, search = message_row(message)  # role and created_at are in the JSON
        found = conn.execute(
            "UPDATE loom_threads SET message_count = message_count + 1, updated_at = ?, "
            "updated_us = ?, version = version + 1 WHERE id = ? RETURNING message_count",
            (updated.isoformat(), sort_key(updated), thread_id),
        ).fetchone()
        if found is None:
            return False
        row = conn.execute(
            "INSERT INTO loom_messages (thread_id, seq, json, data) VALUES (?, ?, ?, ?)",
            (thread_id, found[0] - 1, text, data),
        ).lastrowid
        self.add_search_text(conn, row, thread_id, search)
        return True

    def add_search_text(
        self, conn: sqlite3.Connection, row: int | None, thread_id: str, text: str
    ) -> None:
        """What search reads of message ``row``: its searchable text, and its index entry."""
        conn.execute(
            "INSERT INTO loom_search_text (id, thread_id, text) VALUES (?, ?, ?)",
            (row, thread_id, text),
        )
        if self.indexed:
            conn.execute("INSERT INTO loom_search (rowid, text) VALUES (?, ?)", (row, text))


class Watch:
    """The SQLite store's clock for leases. Kernels that share a file may run on machines
    whose clocks disagree, so no kernel compares its clock with a time another wrote: a
    lease is lapsed when this store has watched it stay unrenewed (the same holder and the
    same ``until`` mark, which every renewal changes) for the lease's length, by this
    process's monotonic clock. A take-over reads the mark and writes in one transaction
    under the file's write lock, so a renewal lands before it (a new mark, watched afresh)
    or after it, refused."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, int], float] = {}
        self._lock = threading.Lock()

    def lapsed(self, holder: str, until: int, length_us: int | None) -> bool:
        now = time.monotonic()
        with self._lock:
            first = self._seen.setdefault((holder, until), now)
            if len(self._seen) > 10_000:  # forget marks long renewed past
                self._seen = {k: v for k, v in self._seen.items() if now - v < 3600}
        seconds = LEASE_SECONDS if length_us is None else length_us / 1_000_000
        return now - first >= seconds
