"""One fixture per store: the contract suite runs every test on each. Adding a store to the
suite is adding a backend here."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loom_nb import Store, Thread, memory_store
from loom_nb.sqlite import sqlite_store


class Backend:
    """How the suite opens a store of one kind, again on the same data (memory: the same
    store), and at the schema version before this one."""

    name = ""

    def open(self) -> Store:
        raise NotImplementedError

    def open_previous_version(self, thread: Thread) -> Store:
        """Write ``thread`` (its record and messages) with the previous schema version's
        tables, then open the current store on it, which upgrades it."""
        raise NotImplementedError


class MemoryBackend(Backend):
    name = "memory"

    def __init__(self) -> None:
        self.store = memory_store()

    def open(self) -> Store:
        return self.store


class SQLiteBackend(Backend):
    name = "sqlite"

    def __init__(self, folder: Path) -> None:
        self.path = folder / "loom.db"

    def open(self) -> Store:
        return sqlite_store(self.path)

    def open_previous_version(self, thread: Thread) -> Store:
        from loom_nb.sqlite import _schema as schema

        conn = sqlite3.connect(self.path, isolation_level=None)
        schema.applied(conn)

        def migrate(migrations: list[Any]) -> None:
            for migration in migrations:
                migration(conn)
                conn.execute(
                    f"INSERT INTO {schema.MIGRATIONS_TABLE} (name) VALUES (?)",
                    (migration.__name__,),
                )

        # The rows are written in m003's form; the previous version's later migrations then
        # carry them on, as they did for a real file.
        previous = schema.MIGRATIONS[:-1]
        migrate(previous[:3])
        record, messages = _rows_of_version_1(thread)
        conn.execute(
            "INSERT INTO loom_threads (id, agent, user_id, title, created_at, updated_at, "
            "updated_us, pending, pending_count, error, message_count) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            record,
        )
        conn.executemany(  # the previous version (m002 on) keeps each message's search text
            "INSERT INTO loom_messages (thread_id, seq, role, created_at, json, data, search) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            messages,
        )
        migrate(previous[3:])
        conn.close()
        return sqlite_store(self.path)


class PostgresBackend(Backend):
    name = "postgres"

    def __init__(self, database: Any, schema: str) -> None:
        self.database, self.schema = database, schema

    def open(self) -> Store:
        from loom_nb.postgres import postgres_store

        return postgres_store(self.database.dsn(), schema=self.schema)  # the app role

    def open_previous_version(self, thread: Thread) -> Store:
        from psycopg import sql

        from loom_nb.postgres import _schema as schema
        from loom_nb.postgres import grants_sql, postgres_store

        self.database.drop_schema(self.schema)
        with self.database.connect() as conn:  # the owner, who migrates
            schema.create(conn, self.schema)
            for migration in schema.MIGRATIONS[:-1]:
                migration(conn, self.schema)
                conn.execute(
                    sql.SQL("INSERT INTO {}.migrations (name) VALUES (%s)").format(
                        sql.Identifier(self.schema)
                    ),
                    (migration.__name__,),
                )
            record, messages = _rows_of_version_1(thread)
            s = sql.Identifier(self.schema)
            conn.execute(
                sql.SQL(
                    "INSERT INTO {}.threads (id, agent, user_id, title, created_at, updated_at, "
                    "updated_us, pending, pending_count, error, message_count) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
                ).format(s),
                record,
            )
            for m in messages:
                conn.execute(
                    sql.SQL(
                        "INSERT INTO {}.messages (thread_id, seq, role, created_at, json, data, "
                        "search) VALUES (%s, %s, %s, %s, %s, %s, %s)"
                    ).format(s),
                    m,
                )
            # the previous version's grants: its schema has no eval suites table yet (m006)
            grants = grants_sql(self.database.app, schema=self.schema).splitlines()
            conn.execute("\n".join(g for g in grants if ".eval_suites " not in g))
        return postgres_store(self.database.dsn(self.database.owner), schema=self.schema)


def _rows_of_version_1(thread: Thread) -> tuple[tuple[Any, ...], list[tuple[Any, ...]]]:
    """The thread as the first schema version's rows (the same columns in both stores)."""
    from loom_nb._sql_stores.rows import message_row

    info = thread.info_dict()
    record = (
        thread.id,
        thread.agent,
        thread.user_id,
        thread.title,
        info["created_at"],
        info["updated_at"],
        round(thread.updated_at.timestamp() * 1_000_000),
        json.dumps(info["pending"]),
        len(thread.pending),
        thread.error,
        len(thread.messages),
    )
    messages = []
    for seq, message in enumerate(thread.messages):
        role, created_at, text, data, search = message_row(message)
        messages.append((thread.id, seq, role, created_at, text, data, search))
    return record, messages


_POSTGRES = pytest.param("postgres", marks=pytest.mark.postgres)


def _open_backend(kind: str, request: pytest.FixtureRequest, folder: Path) -> Backend:
    if kind == "memory":
        return MemoryBackend()
    if kind == "sqlite":
        return SQLiteBackend(folder)
    database = request.getfixturevalue("loom_database")
    return PostgresBackend(database, request.getfixturevalue("postgres_schema"))


@pytest.fixture(params=["memory", "sqlite", _POSTGRES])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """Every store."""
    return _open_backend(request.param, request, tmp_path)


@pytest.fixture(params=["sqlite", _POSTGRES])
def persistent_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """Every store that keeps threads beyond its process (and so has a schema)."""
    return _open_backend(request.param, request, tmp_path)


@pytest.fixture
def store(backend: Backend) -> Iterator[Store]:
    opened = backend.open()
    yield opened
    opened.close()


@pytest.fixture(params=["sqlite", _POSTGRES])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """What a child process opens (``tests.stores._processes.OPEN_STORE``): a SQLite path,
    or ``DSN#SCHEMA`` for PostgreSQL."""
    if request.param == "postgres":
        database = request.getfixturevalue("loom_database")
        return f"{database.dsn()}#{request.getfixturevalue('postgres_schema')}"
    return str(tmp_path / "loom.db")
