"""The PostgreSQL store: the store contract over psycopg 3, mirroring the SQLite store.

- A message is one row, appended by one statement that also touches its thread's record and
  takes the next ``seq`` from it: O(1) at any length, atomic (nothing is ever half-written),
  and safe with many kernels appending to one thread (the thread row's lock orders them).
- Each operation is one statement, or one transaction when it needs several (a thread's
  record and messages are read in one ``REPEATABLE READ`` snapshot, as in SQLite). A
  connection the server closed while idle is replaced before use (see ``_connections``); a
  read that still meets a dead one runs again; a write that fails raises
  :class:`~loom_nb.StoreError` naming the server and saying whether anything was saved.
- Every operation has a deadline (``timeout``): a server that stops answering ends the call
  with :class:`~loom_nb.StoreTimeout` when it is up, never later.
- Scoping: ``user_id`` is matched exactly; with a user, the statement runs in a transaction
  that sets ``loom.user_id`` (local to it), which the optional row level security policies
  read (see ``_sql``).
- Search: see :meth:`PostgresStore.search`.
- A thread's lease and its pending calls' states change by compare-and-set on the thread's row,
  locked for the transaction (``FOR UPDATE``), so of two kernels claiming one call exactly one
  wins; lease times are the server's clock, one clock for every kernel. These writes are the
  SQL stores' steps (``loom_nb._sql_stores.steps``) in PostgreSQL's dialect (``_dialect``).
"""

from __future__ import annotations

import builtins
import json
import re
import time
from collections.abc import Callable, Collection, Sequence
from datetime import datetime, timezone
from typing import Any, TypeVar

import psycopg

from loom_nb._errors import StoreError, StoreTimeout, StoreUnreachable, UserError
from loom_nb._messages import CallState, Lease, Message, PendingApproval, Thread, ThreadInfo
from loom_nb._rules import Rule
from loom_nb._sql_stores import steps
from loom_nb._sql_stores.rows import row_thread
from loom_nb._store import LeasedWrites, Store, ThreadVersion, check_update
from loom_nb.postgres import _schema as schema
from loom_nb.postgres._connections import (
    TIMEOUT_SECONDS,
    GivenConnection,
    GivenPool,
    OwnedConnection,
    PostgresStoreError,
    Unreachable,
    deadlines,
)
from loom_nb.postgres._dialect import PostgresDialect
from loom_nb.postgres._queries import Queries

T = TypeVar("T")

#: Text the word index finds exactly: one ASCII word or number, its own lexeme.
_ONE_WORD = re.compile(r"[a-z0-9]+")
#: What ``LIKE`` reads as wildcards or its escape, escaped to match themselves.
_LIKE_SPECIAL = re.compile(r"[\\%_]")


class PostgresStore(Store, LeasedWrites):  # the methods say what they do once, in Store
    """A :class:`loom_nb.Store` in PostgreSQL. Make one with
    :func:`loom_nb.postgres.postgres_store`."""

    def __init__(
        self,
        dsn: str | None = None,
        *,
        connection: Any = None,
        pool: Any = None,
        schema: str = "loom",
        timeout: float = TIMEOUT_SECONDS,
    ) -> None:
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not 0 < timeout < float("inf")  # NaN too
        ):
            raise UserError(
                f"postgres_store(timeout=...) is the seconds one store call may take (default "
                f"{TIMEOUT_SECONDS:g}), more than 0; got {timeout!r}"
            )
        #: Seconds one operation may take before it fails with StoreTimeout.
        self.timeout = float(timeout)
        given = [name for name, v in (("connection", connection), ("pool", pool)) if v is not None]
        if len(given) > 1 or (given and dsn is not None):
            raise UserError(
                "postgres_store() takes one of a connection string, connection=... or "
                f"pool=..., got {' and '.join((['dsn'] if dsn is not None else []) + given)}"
            )
        if not isinstance(schema, str) or not schema or len(schema.encode()) > 63:
            raise UserError(
                f"postgres_store(schema=...) needs a schema name of 1 to 63 bytes, got {schema!r}"
            )
        if dsn is not None and not isinstance(dsn, str):
            raise UserError(f"postgres_store(dsn) takes a connection string, got {dsn!r}")
        self.schema = schema
        self._q = Queries(schema)
        self._dialect = PostgresDialect(schema)
        self._closed = False
        if connection is not None:
            self._source: OwnedConnection | GivenConnection | GivenPool = GivenConnection(
                connection
            )
        elif pool is not None:
            self._source = GivenPool(pool)
        else:
            self._source = OwnedConnection(dsn or "", self.timeout)
        try:
            self._open()
        except BaseException:
            self._source.close()
            raise

    def __repr__(self) -> str:
        state = " closed" if self._closed else ""
        return f"<PostgresStore {self.describe()}{state}>"

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def describe(self) -> str:
        """Which database this store reads, for ``%loom threads``; never the password."""
        return f"PostgreSQL {self._source.where} schema {self.schema}"

    # ---- the store contract -----------------------------------------------------------------

    def save_thread(self, thread: Thread) -> None:
        self._run(
            lambda conn: steps.save_thread(conn, self._dialect, thread),
            user_id=thread.user_id,
            write=True,
            doing=f"saving thread {thread.id}",
            single=True,
        )

    def append(
        self, thread: Thread, message: Message, *, pending: Sequence[PendingApproval] | None = None
    ) -> None:
        self._run(
            # with pending calls, the approval request and its cards: one transaction
            lambda conn: steps.append(
                conn, self._dialect, thread.id, thread.updated_at, message, pending
            ),
            user_id=thread.user_id,
            write=True,
            doing=f"saving a message to {thread.id}",
            single=pending is None,
        )

    def start(self, thread: Thread, message: Message, *, holder: str, seconds: float) -> None:
        self._run(
            lambda conn: steps.start_thread(conn, self._dialect, thread, message, holder, seconds),
            user_id=thread.user_id,
            write=True,
            doing=f"saving new thread {thread.id}",
        )

    def finish(self, thread: Thread, message: Message, *, holder: str) -> bool:
        return self._run(
            lambda conn: steps.finish(conn, self._dialect, thread, message, holder),
            user_id=thread.user_id,
            write=True,
            doing=f"saving the last message of a run to {thread.id}",
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
        doing = (
            f"saving the results of calls {', '.join(call_ids)} of {thread_id}"
            if message is not None
            else f"deciding calls of {thread_id}"
        )
        self._run(
            lambda conn: steps.move_calls(
                conn, self._dialect, (thread_id, user_id), call_ids, state, expect, holder, message
            ),
            user_id=user_id,
            write=True,
            doing=doing,
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
        return self._run(
            lambda conn: steps.take_lease(
                conn, self._dialect, (thread_id, user_id), holder, seconds, replacing
            ),
            user_id=user_id,
            write=True,
            doing=f"taking thread {thread_id}",
        )

    def release_lease(
        self, thread_id: str, holder: str, *, error: str | None, user_id: str | None = None
    ) -> bool:
        return self._run(
            lambda conn: steps.free_lease(conn, self._dialect, (thread_id, user_id), holder, error),
            user_id=user_id,
            write=True,
            doing=f"freeing thread {thread_id}",
            single=True,
        )

    def load(self, thread_id: str, *, user_id: str | None = None) -> Thread | None:
        where, params = self._owner(user_id, id=thread_id)

        def read(conn: psycopg.Connection[Any]) -> tuple[Any, builtins.list[Any]] | None:
            record = conn.execute(self._q.thread + where, params).fetchone()
            if record is None:
                return None
            return record, conn.execute(self._q.messages, params).fetchall()

        found = self._run(
            read, user_id=user_id, write=False, doing=f"reading thread {thread_id}", snapshot=True
        )
        if found is None:
            return None
        record, messages = found
        return row_thread(record, messages, lapsed=bool(record[12]))

    def list(
        self,
        *,
        agent: str | None = None,
        user_id: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> builtins.list[ThreadInfo]:
        where, params = self._owner(user_id, agent=agent)
        query = self._q.listing + where + self._q.order + " LIMIT %(limit)s OFFSET %(offset)s"
        params.update(limit=max(int(limit), 0), offset=max(int(offset), 0))
        return self._infos(query, params, user_id, "listing threads")

    def search(
        self, text: str, *, agent: str | None = None, user_id: str | None = None, limit: int = 50
    ) -> builtins.list[ThreadInfo]:
        """Threads with a message that contains ``text``, newest first.

        Case-insensitive like the SQLite store (Unicode casefold), and found through the word
        index: a message matches when it contains the text exactly *and* every word of the
        text is a whole word of the message (as PostgreSQL's parser splits words). So
        ``revenue`` and ``total revenue`` find "Total revenue"; ``venue`` or ``total rev``
        (pieces of words) find it in the SQLite and memory stores only.
        """
        where, params = self._owner(user_id, agent=agent)
        needle = text.casefold().replace("\x00", "")
        params.update(
            needle=needle,
            pattern="%" + _LIKE_SPECIAL.sub(r"\\\g<0>", needle) + "%",
            one_word=_ONE_WORD.fullmatch(needle) is not None,
        )
        params["limit"] = max(int(limit), 0)
        query = self._q.listing + where + " AND " + self._q.found + self._q.order
        query += " LIMIT %(limit)s"
        return self._infos(query, params, user_id, "searching threads")

    def delete(self, thread_id: str, *, user_id: str | None = None) -> bool:
        where, params = self._owner(user_id, id=thread_id)
        return self._run(
            lambda conn: conn.execute(self._q.delete + where, params).rowcount > 0,
            user_id=user_id,
            write=True,
            doing=f"deleting thread {thread_id}",
            single=True,
        )

    def close(self) -> None:
        """Close the store's own connection (a connection or pool you passed stays open)."""
        if not self._closed:
            self._closed = True
            self._source.close()

    # ---- rules (loom_nb._rules.RuleStore) -----------------------------------------------------

    def save_rule(self, rule: Rule) -> None:
        """Keep ``rule``, in one statement."""
        row = (rule.id, rule.agent, rule.user_id, rule.thread_id, json.dumps(rule.to_dict()))
        self._run(
            lambda conn: conn.execute(self._q.save_rule, row),
            user_id=rule.user_id,
            write=True,
            doing=f"saving rule {rule.id}",
            single=True,
        )

    def load_rules(self, agent: str, *, user_id: str | None = None) -> builtins.list[Rule]:
        """The agent's rules for this user that are not revoked, oldest first."""
        where, params = self._owner(user_id, agent=None)
        params["agent"] = agent
        rows = self._run(
            lambda conn: conn.execute(self._q.rules + where + " ORDER BY made", params).fetchall(),
            user_id=user_id,
            write=False,
            doing="reading the rules",
            single=True,
        )
        return [Rule.from_dict(json.loads(r[0]), store=self) for r in rows]

    def revoke_rule(self, rule_id: str, *, user_id: str | None = None) -> bool:
        """Revoke a rule once (compare-and-set); False when it was revoked already or is not
        this user's."""
        where, params = self._owner(user_id, id=rule_id)
        params["when"] = datetime.now(timezone.utc).isoformat()
        return self._run(
            lambda conn: conn.execute(self._q.revoke_rule + where, params).rowcount > 0,
            user_id=user_id,
            write=True,
            doing=f"revoking rule {rule_id}",
            single=True,
        )

    # ---- eval suites (loom_nb._eval.SuiteStore) -----------------------------------------------

    def add_to_suite(
        self, agent: str, suite: str, thread_ids: Sequence[str], *, user_id: str | None = None
    ) -> None:
        """Add threads to an eval suite (one already in it stays once), in one transaction."""
        rows = [
            {"agent": agent, "user": user_id, "suite": suite, "thread": t}
            for t in dict.fromkeys(thread_ids)
        ]

        def write(conn: psycopg.Connection[Any]) -> None:
            for row in rows:
                conn.execute(self._q.add_to_suite, row)

        self._run(
            write, user_id=user_id, write=True, doing=f"adding threads to eval suite {suite!r}"
        )

    def load_suites(
        self, agent: str, *, user_id: str | None = None
    ) -> dict[str, builtins.list[str]]:
        """The agent's eval suites for this user, with their thread ids as added."""
        where, params = self._owner(user_id, agent=agent)
        rows = self._run(
            lambda conn: conn.execute(self._q.suites + where + " ORDER BY made", params).fetchall(),
            user_id=user_id,
            write=False,
            doing="reading the eval suites",
            single=True,
        )
        found: dict[str, builtins.list[str]] = {}
        for suite, thread_id in rows:
            found.setdefault(suite, []).append(thread_id)
        return found

    # ---- extras -------------------------------------------------------------------------------

    def thread_version(self, thread_id: str, *, user_id: str | None = None) -> ThreadVersion | None:
        """The thread's write counter and message count (None when unknown to this user): one
        indexed row, so a kernel can check that a thread it keeps has not changed."""
        where, params = self._owner(user_id, id=thread_id)
        found = self._run(
            lambda conn: conn.execute(self._q.version + where, params).fetchone(),
            user_id=user_id,
            write=False,
            doing=f"reading thread {thread_id}",
            single=True,
        )
        return None if found is None else ThreadVersion(found[0], found[1])

    @property
    def schema_version(self) -> int:
        """How many schema migrations the database has (this version writes ``VERSION``)."""
        done = self._run(
            lambda conn: schema.applied(conn, self.schema),
            user_id=None,
            write=False,
            doing="reading the schema version",
        )
        return len(done or [])

    # ---- machinery ----------------------------------------------------------------------------

    def _open(self) -> None:
        done = self._run(
            lambda conn: schema.applied(conn, self.schema),
            user_id=None,
            write=False,
            doing="opening the store",
            opening=True,
        )
        if done is not None and schema.unknown(done):
            raise self._newer(schema.unknown(done))
        if done is None or len(done) < schema.VERSION:
            self._run(
                self._migrate, user_id=None, write=True, doing="creating tables", opening=True
            )

    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        schema.lock(conn, self.schema)
        # Again, under the lock: another kernel (the owner) may have just migrated, and then
        # there is nothing to create, which a role without CREATE could not do.
        done = schema.applied(conn, self.schema)
        if done is None:
            schema.create(conn, self.schema)
        if schema.unknown(done or []):
            raise self._newer(schema.unknown(done or []))
        try:
            schema.migrate(conn, self.schema, done or [])
        except psycopg.errors.InsufficientPrivilege:
            if done is None:
                raise
            raise self._older(done) from None

    def _older(self, done: builtins.list[str]) -> PostgresStoreError:
        missing = [m.__name__ for m in schema.MIGRATIONS if m.__name__ not in done]
        return PostgresStoreError(
            f"the schema {self.schema!r} in {self._source.where} was made by an older loom_nb "
            f"(version {len(done)}; this one needs {schema.VERSION}: {', '.join(missing)}) and "
            f"this role may not upgrade it. Open postgres_store(...) once connected as the "
            "schema's owner, which upgrades it; this role's grants need no change"
        )

    def _newer(self, names: builtins.list[str]) -> PostgresStoreError:
        return PostgresStoreError(
            f"the schema {self.schema!r} in {self._source.where} was written by a newer "
            f"loom_nb (it has {', '.join(names)}, which this version does not know). Upgrade "
            "with: pip install -U loom-nb - or use another schema: postgres_store(..., "
            "schema=...)"
        )

    def _owner(
        self, user_id: str | None, *, agent: str | None = None, **params: Any
    ) -> tuple[str, dict[str, Any]]:
        """The WHERE part that scopes to one user (and agent), as the steps do."""
        where = steps.owner(self._dialect, user_id, thread=False)
        params["user"] = user_id
        if agent is not None:
            where += " AND agent = %(agent)s"
            params["agent"] = agent
        return where, params

    def _infos(
        self, query: str, params: dict[str, Any], user_id: str | None, doing: str
    ) -> builtins.list[ThreadInfo]:
        """The threads one listing statement finds."""
        rows = self._run(
            lambda conn: conn.execute(query, params).fetchall(),
            user_id=user_id,
            write=False,
            doing=doing,
            single=True,
        )
        return [_info(r) for r in rows]

    def _run(
        self,
        fn: Callable[[psycopg.Connection[Any]], T],
        *,
        user_id: str | None,
        write: bool,
        doing: str,
        single: bool = False,
        opening: bool = False,
        snapshot: bool = False,
    ) -> T:
        """Run ``fn`` in one transaction, on a live connection; a read that met a dead one
        runs again on a new one. ``single``: ``fn`` runs one statement, which then runs on its
        own (one round trip) when there is no user to set for row level security."""
        if self._closed:
            raise UserError(
                f"the PostgreSQL store {self.describe()} is closed; open it again with "
                "postgres_store()"
            )
        deadline = time.monotonic() + self.timeout
        try:
            return self._attempts(fn, user_id, write, doing, single, opening, snapshot, deadline)
        except Unreachable as exc:  # no connection: nothing of this call reached the server
            outcome = "nothing was saved" if write else "nothing was changed"
            raise StoreUnreachable(f"{exc} ({doing}: {outcome})") from None

    def _attempts(
        self,
        fn: Callable[[psycopg.Connection[Any]], T],
        user_id: str | None,
        write: bool,
        doing: str,
        single: bool,
        opening: bool,
        snapshot: bool,
        deadline: float,
    ) -> T:
        for attempt in (1, 2):
            with self._source.borrow(deadline - time.monotonic()) as conn:
                sent = False  # whether the server may have run a write of this call
                watch = deadlines.arm(conn, deadline - time.monotonic())
                try:
                    if single and user_id is None and conn.autocommit:
                        sent = True
                        return fn(conn)
                    with conn.transaction():  # BEGIN: a connection found dead here ran nothing
                        sent = True
                        if snapshot:  # one consistent view for the statements of a read
                            conn.execute(self._q.snapshot)
                        if user_id is not None:
                            conn.execute(self._q.set_user, (user_id,))
                        return fn(conn)
                except psycopg.OperationalError as exc:
                    self._source.discard()
                    if watch.fired or (
                        isinstance(exc, psycopg.errors.QueryCanceled)
                        and "statement timeout" in str(exc)
                    ):
                        raise self._timed_out(doing, write, sent, watch.fired) from None
                    if attempt == 1 and (not sent or not write) and time.monotonic() < deadline:
                        continue
                    raise self._failed(exc, doing, write) from None
                except psycopg.errors.InsufficientPrivilege as exc:
                    raise self._not_allowed(exc, opening) from None
                except psycopg.Error as exc:
                    raise StoreError(
                        f"the PostgreSQL server {self._source.where} failed {doing}: "
                        f"{_first_line(exc)}"
                    ) from exc
                finally:
                    watch.disarm()
        raise AssertionError("unreachable")

    def _timed_out(self, doing: str, write: bool, sent: bool, cut: bool) -> StoreTimeout:
        if not write:
            outcome = "nothing was changed"
        elif not sent:
            outcome = "nothing was saved by this call (its transaction never began)"
        elif cut:
            outcome = "it may or may not have been saved (the server never answered)"
        else:
            outcome = "nothing was saved by this call (the server cancelled it)"
        return StoreTimeout(
            f"the PostgreSQL server {self._source.where} did not answer within "
            f"{self.timeout:g} s while {doing} (a silent network: a VPN, NAT, proxy or pooler, "
            f"or a stuck server); {outcome}. The next call reconnects; raise "
            "postgres_store(..., timeout=...) if the server is only slow"
        )

    def _failed(self, exc: psycopg.Error, doing: str, write: bool) -> StoreUnreachable:
        if not write:
            outcome = "nothing was changed"
        elif exc.sqlstate is not None:  # the server answered with the error: it rolled back
            outcome = "nothing was saved by this call"
        else:  # the connection broke before any answer, perhaps during the commit
            outcome = "the connection broke before the server answered, so it may have been saved"
        return StoreUnreachable(
            f"the PostgreSQL server {self._source.where} went away while {doing} "
            f"({_first_line(exc)}); {outcome}. The next call reconnects once the server is back"
        )

    def _not_allowed(self, exc: Exception, opening: bool) -> PostgresStoreError:
        said = _first_line(exc)
        if "row-level security" in said:
            return PostgresStoreError(
                f"row level security on {self.schema}.threads in {self._source.where} refused "
                f"this ({said}): with it on, every thread needs a user: give the agent "
                "auth=... so each thread has one"
            )
        if opening:
            fix = (
                "the schema's owner creates and upgrades it: run postgres_store(...) once "
                "connected as that owner (or a role that may CREATE in the database); then "
                "give this role what it needs with the SQL of loom_nb.postgres.grants_sql(...)"
            )
        else:
            fix = "grant this role what it needs with the SQL of loom_nb.postgres.grants_sql(...)"
        return PostgresStoreError(
            f"the PostgreSQL store at {self._source.where} is not allowed to do this ({said}); "
            f"{fix}"
        )


def postgres_store(
    dsn: str | None = None,
    *,
    connection: Any = None,
    pool: Any = None,
    schema: str = "loom",
    timeout: float = TIMEOUT_SECONDS,
) -> PostgresStore:
    """Threads in PostgreSQL (a Supabase project's own database included).

    ``dsn`` is a connection string (``postgresql://USER:PASSWORD@HOST:5432/DATABASE``; None
    reads libpq's ``PG*`` environment variables). Or pass your own psycopg ``connection=`` or
    ``psycopg_pool.ConnectionPool`` as ``pool=``: the store uses them and leaves them open.
    Tables live in ``schema`` (created and migrated on open). A wrong password, a missing
    database or missing privileges raise :class:`PostgresStoreError` here, saying the fix.
    ``timeout``: seconds one store operation may take; a server that stops answering ends it
    with :class:`~loom_nb.StoreTimeout` then (TCP keepalives and ``tcp_user_timeout`` are set
    too, unless the connection string sets them).
    """
    return PostgresStore(dsn, connection=connection, pool=pool, schema=schema, timeout=timeout)


# ---- helpers ------------------------------------------------------------------------------------


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _info(row: Any) -> ThreadInfo:
    return ThreadInfo(
        id=row[0],
        agent=row[1],
        user_id=row[2],
        title=row[3],
        created_at=datetime.fromisoformat(row[4]),
        updated_at=datetime.fromisoformat(row[5]),
        message_count=row[8],
        pending_count=row[9],
    )
