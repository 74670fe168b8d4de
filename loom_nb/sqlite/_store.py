"""The SQLite store: the store contract over Python's ``sqlite3`` (what it promises is in
``loom_nb.sqlite``'s docstring). Its writes are the SQL stores' steps
(``loom_nb._sql_stores.steps``) in SQLite's dialect (``_dialect``); the schema and its
migrations are in ``_schema``, a connection you pass in ``_given``."""

from __future__ import annotations

import builtins
import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from loom_nb._errors import StoreError, UserError
from loom_nb._messages import CallState, Lease, Message, PendingApproval, Thread, ThreadInfo
from loom_nb._rules import Rule
from loom_nb._sql_stores import steps
from loom_nb._sql_stores.rows import THREAD_COLUMNS, row_thread
from loom_nb._store import LeasedWrites, Store, ThreadVersion, check_update
from loom_nb.sqlite import _given as given
from loom_nb.sqlite import _schema as schema
from loom_nb.sqlite._dialect import SQLiteDialect, Watch, now_us

DEFAULT_PATH = ".loom/loom.db"

#: How long one operation waits for another process's write lock before giving up.
BUSY_SECONDS = 60.0

T = TypeVar("T")


class SQLiteStoreError(UserError):
    """The SQLite store cannot use its file; the message says what to do."""


class StoreNotWritableError(SQLiteStoreError):
    """The path cannot be created or written."""


class NotADatabaseError(SQLiteStoreError):
    """The file exists but is not a SQLite database."""


class NewerSchemaError(SQLiteStoreError):
    """The file was written by a newer loom_nb."""


#: What a listing shows, in ThreadInfo's field order.
_INFO_COLUMNS = "id, agent, user_id, title, created_at, updated_at, message_count, pending_count"


class SQLiteStore(Store, LeasedWrites):  # the methods say what they do once, in Store
    """A :class:`loom_nb.Store` in a SQLite file. Make one with :func:`sqlite_store`."""

    def __init__(
        self,
        path: str | os.PathLike[str] = DEFAULT_PATH,
        database: sqlite3.Connection | None = None,
    ) -> None:
        self._lock = threading.RLock()
        self._closed = False
        self._indexed = False
        self._watch = Watch()
        self._dialect = SQLiteDialect(self._watch, indexed=False)
        if database is not None:
            if not isinstance(database, sqlite3.Connection):
                raise UserError(
                    f"sqlite_store(database=...) takes a sqlite3.Connection, got "
                    f"{type(database).__name__}; or pass a file path with path=..."
                )
            self._owns = False
            self.path = given.database_path(database)
            self._conn = database
            given.check_shared_threads(database)
        else:
            if not isinstance(path, str | os.PathLike):
                raise UserError(
                    f"sqlite_store(path=...) takes a file path (a str or a Path), got "
                    f"{type(path).__name__} {path!r}; leave it out for {DEFAULT_PATH}"
                )
            self._owns = True
            self.path = os.fspath(path)
            self._conn = _connect(self.path)
        try:
            self._open()
        except BaseException:
            if self._owns:
                self._conn.close()
            raise

    def __repr__(self) -> str:
        state = " closed" if self._closed else ""
        return f"<SQLiteStore {self.path!r}{state}>"

    def describe(self) -> str:
        """Which file this store reads, for ``%loom threads``."""
        return f"SQLite file {self.path}"

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- the store contract -----------------------------------------------------------------

    def save_thread(self, thread: Thread) -> None:
        self._write(
            lambda conn: steps.save_thread(conn, self._dialect, thread),
            f"saving thread {thread.id}",
        )

    def append(
        self, thread: Thread, message: Message, *, pending: Sequence[PendingApproval] | None = None
    ) -> None:
        self._write(
            lambda conn: steps.append(
                conn, self._dialect, thread.id, thread.updated_at, message, pending
            ),
            f"saving a message to {thread.id}",
        )

    def start(self, thread: Thread, message: Message, *, holder: str, seconds: float) -> None:
        self._write(
            lambda conn: steps.start_thread(conn, self._dialect, thread, message, holder, seconds),
            f"saving new thread {thread.id}",
        )

    def finish(self, thread: Thread, message: Message, *, holder: str) -> bool:
        return self._write(
            lambda conn: steps.finish(conn, self._dialect, thread, message, holder),
            f"saving the last message of a run to {thread.id}",
        )

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
        self._write(
            lambda conn: steps.move_calls(
                conn, self._dialect, (thread_id, user_id), call_ids, state, expect, holder, message
            ),
            f"saving the results of calls {', '.join(call_ids)} of {thread_id}"
            if message is not None
            else f"deciding calls of {thread_id}",
        )

    def acquire_lease(
        self,
        thread_id: str,
        holder: str,
        seconds: float,
        *,
        replacing: str | None = None,
        user_id: str | None = None,
    ) -> Lease:
        return self._write(
            lambda conn: steps.take_lease(
                conn, self._dialect, (thread_id, user_id), holder, seconds, replacing
            ),
            f"taking thread {thread_id}",
        )

    def release_lease(
        self, thread_id: str, holder: str, *, error: str | None, user_id: str | None = None
    ) -> bool:
        return self._write(
            lambda conn: steps.free_lease(conn, self._dialect, (thread_id, user_id), holder, error),
            f"freeing thread {thread_id}",
        )

    def load(self, thread_id: str, *, user_id: str | None = None) -> Thread | None:
        def read(conn: sqlite3.Connection) -> tuple[Any, builtins.list[Any]] | None:
            record = conn.execute(
                f"SELECT {THREAD_COLUMNS}, lease_us FROM loom_threads "
                "WHERE id = ? AND user_id IS ?",
                (thread_id, user_id),
            ).fetchone()
            if record is None:
                return None
            rows = conn.execute(
                "SELECT json, data FROM loom_messages WHERE thread_id = ? ORDER BY seq",
                (thread_id,),
            ).fetchall()
            return record, rows

        found = self._read(read)
        if found is None:
            return None
        record, messages = found
        lapsed = record[10] is not None and self._watch.lapsed(record[10], record[11], record[12])
        return row_thread(record, messages, lapsed=lapsed)

    def list(
        self,
        *,
        agent: str | None = None,
        user_id: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[ThreadInfo]:
        sql = f"SELECT {_INFO_COLUMNS} FROM loom_threads WHERE user_id IS ?"
        params: builtins.list[Any] = [user_id]
        if agent is not None:
            sql += " AND agent = ?"
            params.append(agent)
        sql += " ORDER BY updated_us DESC, rowid LIMIT ? OFFSET ?"
        params += [max(int(limit), 0), max(int(offset), 0)]
        return [_info(r) for r in self._query(sql, params)]

    def search(
        self, text: str, *, agent: str | None = None, user_id: str | None = None, limit: int = 50
    ) -> builtins.list[ThreadInfo]:
        needle = text.casefold()
        sql = f"SELECT {_INFO_COLUMNS} FROM loom_threads t WHERE user_id IS ?"
        params: builtins.list[Any] = [user_id]
        if agent is not None:
            sql += " AND agent = ?"
            params.append(agent)
        pieces = _trigrams(needle)
        # Each message's stored searchable text holds the needle (instr: exact, any length).
        found = "instr(s.text, ?) > 0"
        if self._indexed and pieces:
            # Candidates from the index (the needle's pieces all present), each confirmed by
            # its stored text.
            match = " AND ".join('"' + p.replace('"', '""') + '"' for p in pieces)
            sql = (
                "WITH hits (id) AS (SELECT rowid FROM loom_search WHERE loom_search MATCH ?) "
                + sql
                + " AND t.id IN (SELECT s.thread_id FROM loom_search_text s"
                f" WHERE s.id IN hits AND {found})"
            )
            params = [match, *params, needle]
        else:
            # Shorter than the index's pieces: one pass over the compact stored texts.
            sql += f" AND t.id IN (SELECT s.thread_id FROM loom_search_text s WHERE {found})"
            params.append(needle)
        sql += " ORDER BY updated_us DESC, rowid LIMIT ?"
        params.append(max(int(limit), 0))
        return [_info(r) for r in self._query(sql, params)]

    def delete(self, thread_id: str, *, user_id: str | None = None) -> bool:
        def write(conn: sqlite3.Connection) -> bool:
            gone = conn.execute(
                "DELETE FROM loom_threads WHERE id = ? AND user_id IS ?", (thread_id, user_id)
            ).rowcount
            if gone:
                _delete_search_text(conn, thread_id, self._indexed)
                conn.execute("DELETE FROM loom_messages WHERE thread_id = ?", (thread_id,))
            return bool(gone)

        return self._write(write, f"deleting thread {thread_id}")

    def close(self) -> None:
        """Close the file (a connection passed as ``database=`` is left open: it is yours)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._owns:
                self._conn.close()

    # ---- rules (loom_nb._rules.RuleStore) -----------------------------------------------------

    def save_rule(self, rule: Rule) -> None:
        """Keep ``rule``, in one transaction."""
        row = (
            rule.id,
            rule.agent,
            rule.user_id,
            rule.thread_id,
            json.dumps(rule.to_dict(), ensure_ascii=False),
            time.time_ns() // 1000,
        )
        self._write(
            lambda conn: conn.execute(
                "INSERT INTO loom_rules (id, agent, user_id, thread_id, json, created_us) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                row,
            ),
            f"saving rule {rule.id}",
        )

    def load_rules(self, agent: str, *, user_id: str | None = None) -> builtins.list[Rule]:
        """The agent's rules for this user that are not revoked, oldest first."""
        rows = self._query(
            "SELECT json FROM loom_rules WHERE agent = ? AND user_id IS ? "
            "AND revoked_at IS NULL ORDER BY created_us, rowid",
            [agent, user_id],
        )
        return [Rule.from_dict(json.loads(text), store=self) for (text,) in rows]

    def revoke_rule(self, rule_id: str, *, user_id: str | None = None) -> bool:
        """Revoke a rule once (compare-and-set); False when it was revoked already or is not
        this user's."""
        when = datetime.now(timezone.utc).isoformat()
        return self._write(
            lambda conn: (
                conn.execute(
                    "UPDATE loom_rules SET revoked_at = ? "
                    "WHERE id = ? AND user_id IS ? AND revoked_at IS NULL",
                    (when, rule_id, user_id),
                ).rowcount
                > 0
            ),
            f"revoking rule {rule_id}",
        )

    # ---- eval suites (loom_nb._eval.SuiteStore) -----------------------------------------------

    def add_to_suite(
        self, agent: str, suite: str, thread_ids: Sequence[str], *, user_id: str | None = None
    ) -> None:
        """Add threads to an eval suite (one already in it stays once), in one transaction."""

        def write(conn: sqlite3.Connection) -> None:
            for thread_id in dict.fromkeys(thread_ids):
                row = (agent, user_id, suite, thread_id)
                conn.execute(
                    "INSERT INTO loom_eval_suites (agent, user_id, suite, thread_id, added_us) "
                    "SELECT ?, ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM loom_eval_suites "
                    "WHERE agent = ? AND user_id IS ? AND suite = ? AND thread_id = ?)",
                    (agent, user_id, suite, thread_id, time.time_ns() // 1000, *row),
                )

        self._write(write, f"adding threads to eval suite {suite!r}")

    def load_suites(
        self, agent: str, *, user_id: str | None = None
    ) -> dict[str, builtins.list[str]]:
        """The agent's eval suites for this user, with their thread ids as added."""
        rows = self._query(
            "SELECT suite, thread_id FROM loom_eval_suites WHERE agent = ? AND user_id IS ? "
            "ORDER BY added_us, rowid",
            [agent, user_id],
        )
        found: dict[str, builtins.list[str]] = {}
        for suite, thread_id in rows:
            found.setdefault(suite, []).append(thread_id)
        return found

    # ---- extras -------------------------------------------------------------------------------

    def thread_version(self, thread_id: str, *, user_id: str | None = None) -> ThreadVersion | None:
        """The thread's write counter and message count (None when unknown to this user): one
        indexed read, so a kernel can check that a thread it keeps has not changed."""
        rows = self._query(
            "SELECT version, message_count FROM loom_threads WHERE id = ? AND user_id IS ?",
            [thread_id, user_id],
        )
        return ThreadVersion(rows[0][0], rows[0][1]) if rows else None

    @property
    def schema_version(self) -> int:
        """How many schema migrations the file has (this version writes ``len(MIGRATIONS)``)."""
        return len(self._read(schema.applied_or_empty))

    # ---- machinery ----------------------------------------------------------------------------

    def _open(self) -> None:
        conn = self._conn
        try:
            if self._owns:
                _retry(lambda: conn.execute("PRAGMA journal_mode = WAL"), self.path)
                conn.execute("PRAGMA synchronous = FULL")
            done = self._read(schema.applied_or_empty)
            newer = schema.unknown(done)
            if newer:
                raise self._newer(newer)
            if len(done) < schema.VERSION:
                self._write(self._migrate, "creating tables")
            conn.create_function("loom_now_us", 0, now_us)
            #: Whether the file has the search index (not when its SQLite had no trigram FTS5).
            self._indexed = self._read(_has_search_index)
            self._dialect = SQLiteDialect(self._watch, self._indexed)
        except sqlite3.DatabaseError as exc:
            raise _translate(exc, self.path) from exc

    def _migrate(self, conn: sqlite3.Connection) -> None:
        done = schema.applied(conn)  # again, inside the write lock: another process may have won
        newer = schema.unknown(done)
        if newer:
            raise self._newer(newer)
        schema.migrate(conn, done)

    def _newer(self, names: builtins.list[str]) -> NewerSchemaError:
        return NewerSchemaError(
            f"{self.path} was written by a newer loom_nb (its schema has {', '.join(names)}, "
            f"which this version does not know). Upgrade with: pip install -U loom-nb "
            "- or open another file with sqlite_store(path=...)"
        )

    def _connection(self) -> sqlite3.Connection:
        if self._closed:
            raise UserError(
                f"the SQLite store {self.path} is closed; open it again with sqlite_store()"
            )
        if self._conn.in_transaction and self._owns:  # left over from an interrupted call
            self._conn.execute("ROLLBACK")
        elif self._conn.in_transaction:
            raise UserError(
                "the sqlite3 connection passed as sqlite_store(database=...) is inside a "
                "transaction; commit or roll it back before the store uses it"
            )
        return self._conn

    def _write(self, fn: Callable[[sqlite3.Connection], T], doing: str) -> T:
        """``fn`` in one write transaction; ``doing`` names it in errors (what was not saved)."""
        return self._transaction(fn, "BEGIN IMMEDIATE", doing)

    def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return self._transaction(fn, "BEGIN", None)

    def _query(self, sql: str, params: builtins.list[Any]) -> builtins.list[Any]:
        """The rows of one SELECT: a statement reads one snapshot, no transaction needed."""
        with self._lock:
            conn = self._connection()
            try:
                return _retry(lambda: conn.execute(sql, params).fetchall(), self.path)
            except sqlite3.DatabaseError as exc:
                raise _translate(exc, self.path) from exc

    def _transaction(
        self, fn: Callable[[sqlite3.Connection], T], begin: str, doing: str | None
    ) -> T:
        with self._lock:
            conn = self._connection()

            def attempt() -> T:
                conn.execute(begin)
                try:
                    result = fn(conn)
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        with contextlib.suppress(sqlite3.Error):
                            conn.execute("ROLLBACK")
                    raise
                return result

            try:
                return _retry(attempt, self.path)
            except sqlite3.DatabaseError as exc:
                raise _translate(exc, self.path, doing) from exc


def sqlite_store(
    path: str | os.PathLike[str] = DEFAULT_PATH, database: sqlite3.Connection | None = None
) -> SQLiteStore:
    """Threads in a SQLite file (``.loom/loom.db`` by default); the folder is created.

    ``database`` is your own ``sqlite3`` connection instead of a path; open it with
    ``check_same_thread=False`` (the agent saves from its own thread). Its journal mode and
    durability settings are yours; ``close()`` leaves it open.
    """
    return SQLiteStore(path, database)


# ---- helpers ------------------------------------------------------------------------------------


def _connect(path: str) -> sqlite3.Connection:
    if path != ":memory:" and not path.startswith("file:"):
        target = Path(path).expanduser()
        if target.is_dir():
            raise StoreNotWritableError(
                f"{path} is a folder, not a database file; pass a file path such as "
                f"sqlite_store(path={os.path.join(path, 'loom.db')!r})"
            )
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreNotWritableError(
                f"cannot create the folder {str(target.parent)!r} for the thread store "
                f"({exc.strerror or exc}); pass a path you can write to: sqlite_store(path=...)"
            ) from exc
        path = str(target)
    try:
        return sqlite3.connect(
            path,
            timeout=BUSY_SECONDS,
            check_same_thread=False,
            isolation_level=None,
            uri=path.startswith("file:"),
        )
    except sqlite3.Error as exc:
        raise _translate(exc, path) from exc


def _retry(fn: Callable[[], T], path: str) -> T:
    """Run ``fn``, again while SQLite reports the file busy or locked (the busy timeout
    covers most waits; a few lock states return at once, e.g. during WAL recovery)."""
    deadline = time.monotonic() + BUSY_SECONDS
    delay = 0.001
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            message = str(exc).lower()
            if ("locked" not in message and "busy" not in message) or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.05)


def _translate(exc: sqlite3.Error, path: str, doing: str | None = None) -> Exception:
    """A loom_nb error for ``exc``, naming the file and, for a write (``doing``), what was not
    saved: SQLite rolled the whole transaction back."""
    message = str(exc)
    lowered = message.lower()
    if isinstance(exc, SQLiteStoreError):
        return exc
    lost = (
        f" while {doing}: nothing of it was saved (what was saved before is kept)" if doing else ""
    )
    if "disk is full" in lowered or "database or disk is full" in lowered:
        return StoreError(
            f"the disk holding the thread store {path} is full{lost}. Free some space there "
            "(SQLite also writes -wal and -shm files next to it), then go on; or keep "
            "threads elsewhere: sqlite_store(path=...)"
        )
    if "not a database" in lowered or "malformed" in lowered or "encrypted" in lowered:
        return NotADatabaseError(
            f"{path} is not a SQLite database loom_nb can read ({message}). Move it away, or "
            "keep threads in another file: sqlite_store(path=...)"
        )
    if (
        "readonly" in lowered
        or "unable to open" in lowered
        or "read-only" in lowered
        or ("disk i/o" in lowered)
    ):
        return StoreNotWritableError(
            f"cannot write the thread store {path} ({message}){lost}. Check that the file and "
            "its folder are writable (SQLite also writes -wal and -shm files next to it), or "
            "pass another path: sqlite_store(path=...)"
        )
    if "already exists" in lowered:  # a table named like ours that loom_nb did not make
        return SQLiteStoreError(
            f"{path} already holds a table that loom_nb did not create ({message}), perhaps "
            "another program's: keep the threads in a file of their own, e.g. "
            f"sqlite_store(path={DEFAULT_PATH!r})"
        )
    if "locked" in lowered or "busy" in lowered:
        return SQLiteStoreError(
            f"{path} stayed locked by another process for {BUSY_SECONDS:.0f} s ({message}); "
            "close the other kernel or program that holds it, then try again"
        )
    return exc


def _delete_search_text(conn: sqlite3.Connection, thread_id: str, indexed: bool) -> None:
    """Take a thread's messages out of what search reads (before the messages go)."""
    ids = "SELECT id FROM loom_messages WHERE thread_id = ?"
    if indexed:
        # A contentless index forgets a row when told the text it was given.
        conn.execute(
            "INSERT INTO loom_search (loom_search, rowid, text) "
            f"SELECT 'delete', id, text FROM loom_search_text WHERE id IN ({ids})",
            (thread_id,),
        )
    conn.execute(f"DELETE FROM loom_search_text WHERE id IN ({ids})", (thread_id,))


def _has_search_index(conn: sqlite3.Connection) -> bool:
    found = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'loom_search'"
    ).fetchone()
    return found is not None


def _trigrams(text: str) -> builtins.list[str]:
    """Three-character pieces of ``text`` that cover every character of it: side by side,
    the last one flush with the end ([] when the text is shorter than three)."""
    if len(text) < 3:
        return []
    starts = [*range(0, len(text) - 2, 3), len(text) - 3]
    return builtins.list(dict.fromkeys(text[i : i + 3] for i in starts))


def _info(row: Any) -> ThreadInfo:
    """A row of :data:`_INFO_COLUMNS`."""
    parse = datetime.fromisoformat
    return ThreadInfo(row[0], row[1], row[2], row[3], parse(row[4]), parse(row[5]), row[6], row[7])
