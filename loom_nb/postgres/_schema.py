"""The PostgreSQL store's schema: small named migrations, applied in order when a store opens.

Everything lives in one schema (``loom`` by default) so the store can share a database with
anything else. Each migration is a function ``(conn, schema) -> None`` run inside the opening
transaction, which holds an advisory lock so two kernels opening at once migrate once. The names
applied are kept in ``<schema>.migrations``; a database holding a name this version does not
know was written by a newer loom_nb, and is refused untouched. To change the schema, append a
function to :data:`MIGRATIONS`; never edit one that has shipped.

The calls that need approval keep their lifecycle in the thread row's ``pending`` JSON, moved by
compare-and-set under the row's lock (``SELECT ... FOR UPDATE``), as the SQLite store does under
its write lock; the lease is two columns of the same row (``m003``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from psycopg import sql

Migration = Callable[[Any, str], None]

MIGRATIONS_TABLE = "migrations"

#: Each message's searchable text up to this many characters is in the word index (tsvector
#: has a 1 MB limit); longer messages are found by a substring scan of their own.
INDEXED_CHARS = 250_000


def _run(conn: Any, schema: str, text: str) -> None:
    conn.execute(sql.SQL(text).format(s=sql.Identifier(schema)))


def m001_threads_and_messages(conn: Any, schema: str) -> None:
    """Thread records, and one row per message (appended, never rewritten)."""
    # Timestamps are kept as the ISO text they were made with (so a thread reads back exactly,
    # its UTC offset included); ``updated_us`` (microseconds since the epoch) orders listings
    # and ``made`` breaks ties in creation order.
    _run(
        conn,
        schema,
        """
        CREATE TABLE {s}.threads (
            id text PRIMARY KEY,
            agent text NOT NULL,
            user_id text,
            title text,
            created_at text NOT NULL,
            updated_at text NOT NULL,
            updated_us bigint NOT NULL,
            pending text NOT NULL DEFAULT '[]',
            pending_count integer NOT NULL DEFAULT 0,
            error text,
            message_count integer NOT NULL DEFAULT 0,
            made bigint GENERATED ALWAYS AS IDENTITY
        )
        """,
    )
    _run(
        conn,
        schema,
        "CREATE INDEX threads_listing ON {s}.threads (user_id, agent, updated_us DESC, made)",
    )
    # ``json`` is the message's JSON form without its tool results' structured data, which
    # lives in ``data`` (as in the SQLite store); ``search`` is its casefolded searchable text.
    _run(
        conn,
        schema,
        """
        CREATE TABLE {s}.messages (
            thread_id text NOT NULL REFERENCES {s}.threads (id) ON DELETE CASCADE,
            seq integer NOT NULL,
            role text NOT NULL,
            created_at text NOT NULL,
            json text NOT NULL,
            data text,
            search text NOT NULL,
            PRIMARY KEY (thread_id, seq)
        )
        """,
    )


def m002_word_index(conn: Any, schema: str) -> None:
    """A word index over each message's searchable text (positions stripped: the exact text is
    checked on the rows it finds), and a small index of the messages too long for it."""
    _run(
        conn,
        schema,
        f"""
        ALTER TABLE {{s}}.messages ADD COLUMN words tsvector GENERATED ALWAYS AS (
            CASE WHEN length(search) <= {INDEXED_CHARS}
            THEN strip(to_tsvector('simple'::regconfig, search)) END
        ) STORED
        """,
    )
    _run(conn, schema, "CREATE INDEX messages_words ON {s}.messages USING gin (words)")
    _run(
        conn,
        schema,
        "CREATE INDEX messages_unindexed ON {s}.messages (thread_id) WHERE words IS NULL",
    )


def m003_thread_leases(conn: Any, schema: str) -> None:
    """Who runs each thread now (one run per thread across kernels), and until when, in
    microseconds of the server's clock. The pending calls' lifecycle states live in the
    ``pending`` JSON, whose earlier form (``decision``) is read as such: nothing is rewritten."""
    _run(
        conn,
        schema,
        "ALTER TABLE {s}.threads ADD COLUMN lease_holder text, ADD COLUMN lease_until_us bigint",
    )


def m004_thread_changes(conn: Any, schema: str) -> None:
    """A counter every write to a thread bumps (a lease taken or renewed does not), so a kernel
    that keeps a thread in memory checks one row instead of loading the thread each turn. A
    thread starts at the server's clock in microseconds: one deleted and made again never
    repeats a number its old self had."""
    _run(conn, schema, "ALTER TABLE {s}.threads ADD COLUMN changes bigint NOT NULL DEFAULT 0")


def m005_rules(conn: Any, schema: str) -> None:
    """Rules that decide approvals by themselves (``agent.allow`` / ``agent.deny``), kept with
    their agent and, for a thread's rule, the thread: the rule's JSON form, and when it was
    revoked (never deleted, so a decision it made still names a rule that was)."""
    _run(
        conn,
        schema,
        """
        CREATE TABLE {s}.rules (
            id text PRIMARY KEY,
            agent text NOT NULL,
            user_id text,
            thread_id text,
            json text NOT NULL,
            created_us bigint NOT NULL,
            revoked_at text,
            made bigint GENERATED ALWAYS AS IDENTITY
        )
        """,
    )
    _run(conn, schema, "CREATE INDEX rules_agent ON {s}.rules (agent, user_id, made)")


def m006_eval_suites(conn: Any, schema: str) -> None:
    """Eval suites (``%loom eval add``): named lists of an agent's saved threads, one row per
    thread in a suite, in the order added."""
    _run(
        conn,
        schema,
        """
        CREATE TABLE {s}.eval_suites (
            agent text NOT NULL,
            user_id text,
            suite text NOT NULL,
            thread_id text NOT NULL,
            made bigint GENERATED ALWAYS AS IDENTITY
        )
        """,
    )
    _run(conn, schema, "CREATE INDEX eval_suites_agent ON {s}.eval_suites (agent, user_id)")


#: Every migration, oldest first. Append only.
MIGRATIONS: list[Migration] = [
    m001_threads_and_messages,
    m002_word_index,
    m003_thread_leases,
    m004_thread_changes,
    m005_rules,
    m006_eval_suites,
]

#: The schema version this code writes: the number of migrations it knows.
VERSION = len(MIGRATIONS)


def applied(conn: Any, schema: str) -> list[str] | None:
    """Names of the migrations applied to ``schema``, or None when loom_nb never made it."""
    # The catalog read with this statement's snapshot: to_regclass() reads a cache that a
    # kernel waiting on the migration lock may hold from before another kernel made the table.
    found = conn.execute(
        "SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
        "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s",
        (schema, MIGRATIONS_TABLE),
    ).fetchone()
    if found is None:
        return None
    rows = conn.execute(
        sql.SQL("SELECT name FROM {}.{} ORDER BY name").format(
            sql.Identifier(schema), sql.Identifier(MIGRATIONS_TABLE)
        )
    ).fetchall()
    return [row[0] for row in rows]


def unknown(names: list[str]) -> list[str]:
    known = {m.__name__ for m in MIGRATIONS}
    return [n for n in names if n not in known]


def lock(conn: Any, schema: str) -> None:
    """Serialize migrations of one schema across every kernel (released at commit)."""
    conn.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"loom_nb migrate {schema}",)
    )


def create(conn: Any, schema: str) -> None:
    """The schema (when missing) and the migrations table."""
    exists = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
    if exists is None:
        _run(conn, schema, "CREATE SCHEMA {s}")
    _run(
        conn,
        schema,
        f"CREATE TABLE IF NOT EXISTS {{s}}.{MIGRATIONS_TABLE} "
        "(name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
    )


def migrate(conn: Any, schema: str, done: list[str]) -> list[str]:
    """Apply the migrations not in ``done``, in order; returns the names applied now."""
    new = []
    for migration in MIGRATIONS:
        if migration.__name__ in done:
            continue
        migration(conn, schema)
        conn.execute(
            sql.SQL("INSERT INTO {}.{} (name) VALUES (%s)").format(
                sql.Identifier(schema), sql.Identifier(MIGRATIONS_TABLE)
            ),
            (migration.__name__,),
        )
        new.append(migration.__name__)
    return new
