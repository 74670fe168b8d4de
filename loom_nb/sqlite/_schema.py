"""The SQLite store's schema: small named migrations, applied in order when a file is opened.

Each migration is a function ``(conn) -> None`` that runs inside the opening write
transaction. The names applied to a file are kept in ``loom_migrations``; a file that holds a
name this version does not know was written by a newer loom_nb, and is refused rather than
misread. To change the schema, append a new function to :data:`MIGRATIONS`; never edit one that
has shipped.

Tables are prefixed ``loom_`` so the store can share a database the user passes in.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable

from loom_nb._messages import Message
from loom_nb._sql_stores.rows import searchable
from loom_nb._store import _searchable

Migration = Callable[[sqlite3.Connection], None]

MIGRATIONS_TABLE = "loom_migrations"


def m001_threads_and_messages(conn: sqlite3.Connection) -> None:
    """Thread records, and one row per message (appended, never rewritten)."""
    conn.execute(
        """
        CREATE TABLE loom_threads (
            id TEXT PRIMARY KEY,
            agent TEXT NOT NULL,
            user_id TEXT,
            title TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            updated_us INTEGER NOT NULL,
            pending TEXT NOT NULL DEFAULT '[]',
            pending_count INTEGER NOT NULL DEFAULT 0,
            error TEXT,
            message_count INTEGER NOT NULL DEFAULT 0
        )
        """
    )
    conn.execute("CREATE INDEX loom_threads_owner ON loom_threads (user_id, agent)")
    # ``json`` is the message's JSON form without its tool results' structured data, which
    # lives in ``data`` (a JSON array, one entry per part, null where a part has none) so that
    # loading a long thread does not decode every DataFrame it ever fetched.
    conn.execute(
        """
        CREATE TABLE loom_messages (
            thread_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            role TEXT NOT NULL,
            created_at TEXT NOT NULL,
            json TEXT NOT NULL,
            data TEXT,
            PRIMARY KEY (thread_id, seq)
        ) WITHOUT ROWID
        """
    )


def m002_search_text(conn: sqlite3.Connection) -> None:
    """A casefolded copy of each message's searchable text (its text and tool result
    contents): exact, Unicode-aware substring search, which LIKE over the JSON cannot give."""
    conn.execute("ALTER TABLE loom_messages ADD COLUMN search TEXT")
    rows = conn.execute("SELECT thread_id, seq, json FROM loom_messages").fetchall()
    conn.executemany(
        "UPDATE loom_messages SET search = ? WHERE thread_id = ? AND seq = ?",
        [(_searchable(Message.from_dict(json.loads(text))), t, seq) for t, seq, text in rows],
    )


def m003_thread_leases(conn: sqlite3.Connection) -> None:
    """Who runs each thread now (one run per thread across processes), and until when. The
    pending calls' lifecycle states live in the ``pending`` JSON, which older files hold in
    the earlier form (``decision``); it is read as such, so nothing is rewritten."""
    conn.execute("ALTER TABLE loom_threads ADD COLUMN lease_holder TEXT")
    conn.execute("ALTER TABLE loom_threads ADD COLUMN lease_until_us INTEGER")


#: Search: SQLite's trigram tokenizer over the casefolded text, without positions (a message
#: holding every trigram of a needle is checked against the message's own text), contentless:
#: the index keeps no copy of the text. ``case_sensitive 1``: the text is casefolded already.
SEARCH_INDEX_DDL = (
    "CREATE VIRTUAL TABLE loom_search USING fts5(text, content='', detail=none, columnsize=0, "
    "tokenize='trigram case_sensitive 1')"
)


def m004_message_rowids_and_search_index(conn: sqlite3.Connection) -> None:
    """Messages move to a rowid table (rows of a few kB pack into pages there, where a WITHOUT
    ROWID table spilled every one into a half-empty overflow page), keyed for loading by a
    unique (thread_id, seq) index, without the columns the JSON holds already (role,
    created_at); search moves from the casefolded copy to an FTS5 index
    (:data:`SEARCH_INDEX_DDL`) whose rowids are the messages' ids. Thread listing gets indexes
    in its own order (newest first, ties in the order the threads were made), and threads a
    version counter."""
    info = conn.execute("PRAGMA table_info(loom_messages)").fetchall()
    # Every other column, as declared (another migration may have added some).
    kept = [(name, kind, notnull, default) for _, name, kind, notnull, default, _ in info]
    kept = [c for c in kept if c[0] not in ("search", "role", "created_at")]
    columns = ", ".join(
        f"{name} {kind}{' NOT NULL' if notnull else ''}"
        + (f" DEFAULT {default}" if default is not None else "")
        for name, kind, notnull, default in kept
    )
    names = ", ".join(c[0] for c in kept)
    conn.execute(f"CREATE TABLE loom_messages_by_rowid (id INTEGER PRIMARY KEY, {columns})")
    conn.execute(
        f"INSERT INTO loom_messages_by_rowid ({names}) "
        f"SELECT {names} FROM loom_messages ORDER BY thread_id, seq"
    )
    if search_index_available(conn):
        conn.execute(SEARCH_INDEX_DDL)
        # From each message's JSON, as appends write it and deletes take it back out.
        conn.executemany(
            "INSERT INTO loom_search (rowid, text) VALUES (?, ?)",
            (
                (row, searchable(json.loads(text)))
                for row, text in conn.execute("SELECT id, json FROM loom_messages_by_rowid")
            ),
        )
    conn.execute("DROP TABLE loom_messages")
    conn.execute("ALTER TABLE loom_messages_by_rowid RENAME TO loom_messages")
    conn.execute("CREATE UNIQUE INDEX loom_messages_order ON loom_messages (thread_id, seq)")
    # Bumped by every write to a thread: a kernel that keeps a thread in memory checks it.
    conn.execute("ALTER TABLE loom_threads ADD COLUMN version INTEGER NOT NULL DEFAULT 0")
    conn.execute("DROP INDEX IF EXISTS loom_threads_owner")
    conn.execute("CREATE INDEX loom_threads_recent ON loom_threads (user_id, updated_us DESC)")
    conn.execute(
        "CREATE INDEX loom_threads_agent_recent ON loom_threads (user_id, agent, updated_us DESC)"
    )


def search_index_available(conn: sqlite3.Connection) -> bool:
    """Whether this SQLite has FTS5 with the trigram tokenizer (3.34+, in most builds)."""
    try:
        conn.execute("CREATE VIRTUAL TABLE temp.loom_probe USING fts5(text, tokenize='trigram')")
    except sqlite3.OperationalError:
        return False
    conn.execute("DROP TABLE temp.loom_probe")
    return True


def m005_lease_length(conn: sqlite3.Connection) -> None:
    """How long each lease lasts without renewal: a kernel judges a lease lapsed by watching
    it go that long unrenewed on its own clock (kernels sharing a file share no clock)."""
    conn.execute("ALTER TABLE loom_threads ADD COLUMN lease_us INTEGER")


def m006_rules(conn: sqlite3.Connection) -> None:
    """Rules that decide approvals by themselves (``agent.allow`` / ``agent.deny``), kept with
    their agent and, for a thread's rule, the thread: the rule's JSON form, and when it was
    revoked (never deleted, so a decision it made still names a rule that was)."""
    conn.execute(
        """
        CREATE TABLE loom_rules (
            id TEXT PRIMARY KEY,
            agent TEXT NOT NULL,
            user_id TEXT,
            thread_id TEXT,
            json TEXT NOT NULL,
            created_us INTEGER NOT NULL,
            revoked_at TEXT
        )
        """
    )
    conn.execute("CREATE INDEX loom_rules_agent ON loom_rules (agent, user_id, created_us)")


def m007_eval_suites(conn: sqlite3.Connection) -> None:
    """Eval suites (``%loom eval add``): named lists of an agent's saved threads, one row per
    thread in a suite, in the order added."""
    conn.execute(
        """
        CREATE TABLE loom_eval_suites (
            agent TEXT NOT NULL,
            user_id TEXT,
            suite TEXT NOT NULL,
            thread_id TEXT NOT NULL,
            added_us INTEGER NOT NULL
        )
        """
    )
    conn.execute("CREATE INDEX loom_eval_suites_agent ON loom_eval_suites (agent, user_id)")


#: Search reads each message's searchable text (casefolded, as ``searchable`` builds it) from
#: here, written with the message: no search parses a message's JSON. ``id`` is the message's.
SEARCH_TEXT_DDL = (
    "CREATE TABLE loom_search_text (id INTEGER PRIMARY KEY, thread_id TEXT NOT NULL, "
    "text TEXT NOT NULL)"
)


def m008_stored_search_text(conn: sqlite3.Connection) -> None:
    """Each message's searchable text kept beside it (:data:`SEARCH_TEXT_DDL`), from the
    messages' JSON once here: short texts, which the trigram index cannot find, are a scan of
    this compact table, and the index's candidates are checked against it."""
    conn.execute(SEARCH_TEXT_DDL)
    conn.executemany(
        "INSERT INTO loom_search_text (id, thread_id, text) VALUES (?, ?, ?)",
        (
            (row, thread_id, searchable(json.loads(text)))
            for row, thread_id, text in conn.execute(
                "SELECT id, thread_id, json FROM loom_messages"
            ).fetchall()
        ),
    )


#: Every migration, oldest first. Append only.
MIGRATIONS: list[Migration] = [
    m001_threads_and_messages,
    m002_search_text,
    m003_thread_leases,
    m004_message_rowids_and_search_index,
    m005_lease_length,
    m006_rules,
    m007_eval_suites,
    m008_stored_search_text,
]

#: The schema version this code writes: the number of migrations it knows.
VERSION = len(MIGRATIONS)


def applied(conn: sqlite3.Connection) -> list[str]:
    """Names of the migrations already applied to this database (creates the table)."""
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} "
        "(name TEXT PRIMARY KEY, applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)"
    )
    return [row[0] for row in conn.execute(f"SELECT name FROM {MIGRATIONS_TABLE} ORDER BY rowid")]


def applied_or_empty(conn: sqlite3.Connection) -> list[str]:
    """Like :func:`applied`, without writing: [] for a file loom_nb never opened."""
    found = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (MIGRATIONS_TABLE,)
    ).fetchone()
    if found is None:
        return []
    return [row[0] for row in conn.execute(f"SELECT name FROM {MIGRATIONS_TABLE} ORDER BY rowid")]


def unknown(names: list[str]) -> list[str]:
    known = {m.__name__ for m in MIGRATIONS}
    return [n for n in names if n not in known]


def migrate(conn: sqlite3.Connection, done: list[str]) -> list[str]:
    """Apply the migrations not in ``done``, in order; returns the names applied now."""
    new = []
    for migration in MIGRATIONS:
        if migration.__name__ in done:
            continue
        migration(conn)
        conn.execute(f"INSERT INTO {MIGRATIONS_TABLE} (name) VALUES (?)", (migration.__name__,))
        new.append(migration.__name__)
    return new
