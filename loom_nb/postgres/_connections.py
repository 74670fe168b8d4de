"""Where the PostgreSQL store gets its connections, and what it says when they fail.

Three sources, one shape (``borrow()`` a connection, ``discard()`` it after a failure):

- a connection string: the store opens one connection of its own (guarded by a lock, as the
  agent saves from its event-loop thread while the notebook lists threads) and opens it again
  when the server went away between two calls;
- ``connection=``: yours; the store uses it and never closes it;
- ``pool=``: a ``psycopg_pool.ConnectionPool``; a connection is borrowed for each operation.

A connection the server closed while it sat idle (a restart, an idle timeout) has the server's
goodbye waiting on its socket; :func:`alive` looks for that without a round trip, so the next
call reconnects instead of failing.

A connection that stops answering (a dropped VPN, an expired NAT entry, a hung proxy or pooler)
closes nothing, so every operation has a deadline: TCP keepalives and ``tcp_user_timeout`` find
a dead peer, the server's ``statement_timeout`` a slow statement, and :class:`Deadlines` (one
watcher thread) shuts the socket of a call that is still waiting when its time is up, which
ends the call at once with an error. The connection's lock is waited for the same time.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import math
import os
import select
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg import pq

from loom_nb._errors import StoreError, UserError


class PostgresStoreError(UserError):
    """The PostgreSQL store cannot use its database as configured; the message says the fix."""


class ConnectFailed(PostgresStoreError):
    """A connection could not be opened: the server's ``reason`` and the ``fix``."""

    def __init__(self, server: str, reason: str, fix: str) -> None:
        super().__init__(f"cannot open the PostgreSQL store at {server}: {reason}; {fix}")
        self.reason = reason
        self.fix = fix


class Unreachable(StoreError):
    """A source has no live connection to give; the store adds what the call did not do."""


#: Seconds one store operation may take (``postgres_store(timeout=...)``) before it fails.
TIMEOUT_SECONDS = 15.0


def connect_defaults(timeout: float) -> dict[str, str]:
    """Added to a connection string unless it says otherwise: a dead peer is found by TCP
    keepalives (idle 5 s, then 3 probes 2 s apart) and unacknowledged data by
    ``tcp_user_timeout``, both well within ``timeout``."""
    return {
        "connect_timeout": str(max(2, min(10, math.ceil(timeout)))),
        "application_name": "loom_nb",
        "keepalives": "1",
        "keepalives_idle": "5",
        "keepalives_interval": "2",
        "keepalives_count": "3",
        "tcp_user_timeout": str(round(timeout * 1000)),
    }


class Deadlines:
    """One daemon thread that ends calls past their deadline by shutting their connection's
    socket (the call then fails at once; the connection is replaced). A call ``arm``s a
    :class:`Watch` before it talks to the server and ``disarm``s it after."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Watch]] = []
        self._cond = threading.Condition()
        self._count = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, conn: psycopg.Connection[Any], seconds: float) -> Watch:
        watch = Watch(conn, self._cond)
        with self._cond:
            heapq.heappush(self._heap, (time.monotonic() + seconds, next(self._count), watch))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._watch, name="loom-nb-store-deadlines", daemon=True
                )
                self._thread.start()
            elif self._heap[0][2] is watch:
                self._cond.notify()
        return watch

    def _watch(self) -> None:
        with self._cond:
            while True:
                while self._heap and self._heap[0][2].done:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait()
                    continue
                wait = self._heap[0][0] - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                heapq.heappop(self._heap)[2].fire()


class Watch:
    """One call's deadline: ``fired`` once it cut the call off."""

    def __init__(self, conn: psycopg.Connection[Any], lock: threading.Condition) -> None:
        self.conn = conn
        self.done = False
        self.fired = False
        self._lock = lock

    def disarm(self) -> None:
        with self._lock:  # after this, fire() cannot touch the connection
            self.done = True

    def fire(self) -> None:
        """(Under the lock.) Shut the socket: a blocked read or write returns at once."""
        if self.done:
            return
        self.done = self.fired = True
        with contextlib.suppress(Exception):
            fd = self.conn.pgconn.socket
            sock = socket.socket(fileno=os.dup(fd))
            try:
                sock.shutdown(socket.SHUT_RDWR)
            finally:
                sock.close()


deadlines = Deadlines()


def alive(conn: psycopg.Connection[Any], *, replaceable: bool = True) -> bool:
    """False when the server has closed this idle connection (checked without a round trip).

    An idle connection has nothing to read unless the server said goodbye (PostgreSQL sends
    "terminating connection" as it shuts down, then closes). A connection the store can
    replace is given up at any sign of that; yours is read first (a LISTEN notification
    looks the same), and given up only if the read shows it closed.
    """
    if conn.closed or conn.broken:
        return False
    pgconn = conn.pgconn
    try:
        readable, _, _ = select.select([pgconn.socket], [], [], 0)
        if readable:
            if replaceable:
                return False
            pgconn.consume_input()
    except (OSError, ValueError, psycopg.Error):
        return False
    return (
        pgconn.status == pq.ConnStatus.OK
        and pgconn.transaction_status != pq.TransactionStatus.UNKNOWN
    )


def where(conn: psycopg.Connection[Any]) -> str:
    """``user@host:port/dbname``: how errors and ``describe()`` name the server."""
    info = conn.info
    return _where(info.user, info.host, str(info.port), info.dbname)


def _where(user: str | None, host: str | None, port: str | None, dbname: str | None) -> str:
    host = host or "localhost"
    if host.startswith("/"):  # a Unix socket folder
        host = f"[{host}]"
    at = f"{host}:{port}" if port and port != "5432" else host
    return f"{user}@{at}/{dbname}" if user else f"{at}/{dbname}"


def connect(
    dsn: str, timeout: float = TIMEOUT_SECONDS, within: float | None = None
) -> psycopg.Connection[Any]:
    """Open a connection (in ``within`` s, if given), or raise one :class:`PostgresStoreError`
    that says how to fix it. Its statements time out on the server after ``timeout`` s too
    (``SET statement_timeout``, not the ``options`` startup parameter, which poolers such as
    PgBouncer refuse)."""
    try:
        params = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise PostgresStoreError(
            f"postgres_store() cannot read the connection string ({exc}); write it as "
            "postgresql://USER:PASSWORD@HOST:5432/DATABASE"
        ) from None
    for key, value in connect_defaults(timeout).items():
        params.setdefault(key, value)
    if within is not None:
        params["connect_timeout"] = str(
            min(int(str(params["connect_timeout"])), max(2, int(within)))
        )
    try:
        conn = psycopg.connect(psycopg.conninfo.make_conninfo("", **params), autocommit=True)
    except psycopg.OperationalError as exc:
        raise _connect_error(exc, params) from None
    if "statement_timeout" not in str(params.get("options", "")):  # the connection string wins
        watch = deadlines.arm(conn, timeout)
        try:
            conn.execute(f"SET statement_timeout = {round(timeout * 1000)}")
        except psycopg.Error as exc:
            conn.close()
            raise _connect_error(psycopg.OperationalError(str(exc)), params) from None
        finally:
            watch.disarm()
    return conn


def _connect_error(exc: psycopg.OperationalError, params: dict[str, Any]) -> ConnectFailed:
    import getpass
    import os

    user = params.get("user") or os.environ.get("PGUSER") or getpass.getuser()
    dbname = params.get("dbname") or os.environ.get("PGDATABASE") or user
    server = _where(
        user,
        params.get("host") or os.environ.get("PGHOST"),
        str(params.get("port") or os.environ.get("PGPORT") or "5432"),
        dbname,
    )
    said = str(exc).strip()
    reason = said.rsplit("FATAL:", 1)[-1].strip().splitlines()[0] if said else type(exc).__name__
    lowered = said.lower()
    if "password authentication failed" in lowered or "no password supplied" in lowered:
        fix = (
            f"check the password of user {user!r} in the connection string "
            "(postgresql://USER:PASSWORD@HOST/DATABASE), in PGPASSWORD or in ~/.pgpass"
        )
    elif "role" in lowered and "does not exist" in lowered:
        fix = f"create the role (CREATE ROLE {user} LOGIN PASSWORD '...') or connect as another"
    elif "database" in lowered and "does not exist" in lowered:
        fix = (
            f"create it (CREATE DATABASE {dbname}) or name an existing database at the end "
            "of the connection string"
        )
    elif any(
        said in lowered
        for said in (
            "starting up",
            "shutting down",
            "in recovery",
            "terminating connection",
            "closed the connection unexpectedly",
        )
    ):
        fix = "the server is restarting (the connection string is fine); try again in a moment"
    elif "connection refused" in lowered or "no such file or directory" in lowered:
        fix = "start the server, or check the host and port in the connection string"
    elif "could not translate host name" in lowered or "name or service not known" in lowered:
        fix = "check the host name in the connection string"
    elif "timeout" in lowered:
        fix = "check that the host and port are reachable from this machine (firewall, VPN)"
    elif "pg_hba.conf" in lowered:
        fix = "ask the database's admin to allow this host and user in pg_hba.conf"
    else:
        fix = "check the connection string"
    return ConnectFailed(server, reason, fix)


class OwnedConnection:
    """One connection the store opened from a connection string, reopened when it died."""

    def __init__(self, dsn: str, timeout: float = TIMEOUT_SECONDS) -> None:
        self._dsn = dsn
        self._timeout = timeout
        self._lock = threading.RLock()
        self._conn: psycopg.Connection[Any] | None = connect(dsn, timeout)
        self.where = where(self._conn)

    @contextlib.contextmanager
    def borrow(self, wait: float = TIMEOUT_SECONDS) -> Iterator[psycopg.Connection[Any]]:
        asked = time.monotonic()
        with _held(self._lock, wait, self.where):
            if (
                self._conn is None
                or not alive(self._conn)
                # left inside a transaction by an interrupted call (Ctrl-C): start afresh
                or self._conn.info.transaction_status != pq.TransactionStatus.IDLE
            ):
                self.discard()
                left = wait - (time.monotonic() - asked)
                if left < 2:  # libpq's shortest connect_timeout: it would overrun the deadline
                    raise Unreachable(
                        f"the connection to the PostgreSQL server {self.where} was lost by the "
                        "call before this one, and too little of this call's time is left to "
                        "open another"
                    )
                try:
                    self._conn = connect(self._dsn, self._timeout, left)
                except ConnectFailed as exc:
                    raise Unreachable(
                        f"the PostgreSQL server {self.where} is unreachable ({exc.reason}; "
                        f"{exc.fix}); the next call reconnects once it is back"
                    ) from None
            yield self._conn

    def discard(self) -> None:
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(Exception):
                    self._conn.close()
                self._conn = None

    def close(self) -> None:
        self.discard()


@contextlib.contextmanager
def _held(lock: threading.RLock, wait: float, server: str) -> Iterator[None]:
    """``lock`` for at most ``wait`` s: a call that hangs holds it no longer than its own
    deadline, so a caller that waits longer than that meets a store in trouble."""
    if not lock.acquire(timeout=max(wait, 0.0)):
        raise Unreachable(
            f"the connection to the PostgreSQL server {server} is still busy with another "
            f"call after {wait:g} s"
        )
    try:
        yield
    finally:
        lock.release()


class GivenConnection:
    """Your connection: used under a lock, never closed or replaced."""

    def __init__(self, conn: Any) -> None:
        if not isinstance(conn, psycopg.Connection):
            raise UserError(
                "postgres_store(connection=...) takes a psycopg.Connection (psycopg 3, not "
                f"async), got {type(conn).__name__}; or pass a connection string"
            )
        self._conn = conn
        self._lock = threading.RLock()
        if conn.closed:
            raise UserError("the connection passed as postgres_store(connection=...) is closed")
        self.where = where(conn)

    @contextlib.contextmanager
    def borrow(self, wait: float = TIMEOUT_SECONDS) -> Iterator[psycopg.Connection[Any]]:
        with _held(self._lock, wait, self.where):
            if not alive(self._conn, replaceable=False):
                raise Unreachable(
                    f"the connection to the PostgreSQL server {self.where} passed as "
                    "postgres_store(connection=...) is closed; pass a new one, or a connection "
                    "string so the store can reconnect by itself"
                )
            if self._conn.info.transaction_status != pq.TransactionStatus.IDLE:
                raise UserError(
                    "the connection passed as postgres_store(connection=...) is inside a "
                    "transaction; commit or roll it back before the store uses it"
                )
            yield self._conn

    def discard(self) -> None:
        """Yours to replace: the next call says so."""

    def close(self) -> None:
        """Yours to close."""


class GivenPool:
    """Your ``psycopg_pool.ConnectionPool``: a connection per operation, dead ones dropped."""

    def __init__(self, pool: Any) -> None:
        if not (hasattr(pool, "getconn") and hasattr(pool, "putconn")):
            raise UserError(
                "postgres_store(pool=...) takes a psycopg_pool.ConnectionPool, got "
                f"{type(pool).__name__}"
            )
        self._pool = pool
        self._local = threading.local()
        with self.borrow() as conn:
            self.where = where(conn)

    @contextlib.contextmanager
    def borrow(self, wait: float = TIMEOUT_SECONDS) -> Iterator[psycopg.Connection[Any]]:
        conn = self._get(wait)
        if not alive(conn):
            conn.close()  # the pool drops a closed connection when it comes back
            self._pool.putconn(conn)
            conn = self._get(wait)
        self._local.conn = conn
        try:
            yield conn
        finally:
            self._local.conn = None
            self._pool.putconn(conn)

    def _get(self, wait: float = TIMEOUT_SECONDS) -> psycopg.Connection[Any]:
        try:  # no longer than the call's deadline: a pool whose connections all hang
            conn: psycopg.Connection[Any] = self._pool.getconn(timeout=max(wait, 0.1))
        except psycopg.Error as exc:  # psycopg_pool.PoolTimeout is one
            raise Unreachable(f"the connection pool gave no connection: {exc}") from None
        return conn

    def discard(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def close(self) -> None:
        """Yours to close."""
