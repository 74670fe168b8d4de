"""Threads in a SQLite file, with Python's built-in ``sqlite3``: nothing to install.

.. code-block:: python

    from loom_nb.sqlite import sqlite_store

    agent = define_agent(..., store=sqlite_store())            # .loom/loom.db
    store = sqlite_store(path="work/threads.db")               # any path; the folder is created
    store = sqlite_store(database=sqlite3.connect("app.db", check_same_thread=False))
    store.close()

How it keeps what it is given:

- Each completed message is one row, appended in one short transaction together with an update
  of its thread's record; a thread is never rewritten, so appending costs the same at message
  5,000 as at message 10.
- The file is in WAL mode with ``synchronous=FULL``: a message is on disk when ``append``
  returns, so a kernel crash (or a power cut) loses nothing that had completed.
- Writes take the write lock up front (``BEGIN IMMEDIATE``) and wait for it (busy timeout, then
  retries), so two kernels writing to one file at once lose nothing and never see
  "database is locked".
- One connection per store, guarded by a lock: the agent saves from its private event-loop
  thread while the notebook lists threads from the main thread.
- The schema is versioned by named migrations applied on open (see ``loom_nb.sqlite._schema``);
  a file from a newer loom_nb is refused with a message saying to upgrade, never misread.
- Text search is a case-insensitive (Unicode casefold) substring match over each message's text
  and tool result contents, like ``memory_store()``. That searchable text, casefolded, is kept
  beside each message (``loom_search_text``, written in the append's transaction), so no
  search parses a message. An FTS5 trigram index, written with it, finds the messages that
  hold every three-character piece of the text; each is then checked against its stored text,
  so the answers are exact. (Texts shorter than three characters, or an SQLite without FTS5's
  trigram tokenizer, scan the stored texts: one pass, no Python per message.)
- The thread's lease and its pending calls' states change by compare-and-set inside one
  ``BEGIN IMMEDIATE`` transaction each: the write lock makes the read and the write one step,
  so of two kernels claiming one call exactly one wins.
"""

from __future__ import annotations

from loom_nb import _public
from loom_nb.sqlite._store import (
    DEFAULT_PATH,
    NewerSchemaError,
    NotADatabaseError,
    SQLiteStore,
    SQLiteStoreError,
    StoreNotWritableError,
    sqlite_store,
)

__all__ = [
    "DEFAULT_PATH",
    "NewerSchemaError",
    "NotADatabaseError",
    "SQLiteStore",
    "SQLiteStoreError",
    "StoreNotWritableError",
    "sqlite_store",
]

_public.publish(
    __name__,
    [
        SQLiteStore,
        sqlite_store,
        SQLiteStoreError,
        StoreNotWritableError,
        NotADatabaseError,
        NewerSchemaError,
    ],
)
