"""Checks of a ``sqlite3`` connection the user passes as ``sqlite_store(database=...)``."""

from __future__ import annotations

import sqlite3
import threading

from loom_nb._errors import UserError


def database_path(conn: sqlite3.Connection) -> str:
    """The file a connection has open (":memory:" for none)."""
    try:
        row = conn.execute("PRAGMA database_list").fetchone()
    except sqlite3.ProgrammingError as exc:
        raise UserError(f"sqlite_store(database=...) got an unusable connection: {exc}") from exc
    return str(row[2]) if row and row[2] else ":memory:"


def check_shared_threads(conn: sqlite3.Connection) -> None:
    """The agent saves from its own thread: a connection bound to one thread cannot serve it."""
    failure: list[BaseException] = []

    def probe() -> None:
        try:
            conn.execute("SELECT 1")
        except sqlite3.ProgrammingError as exc:
            failure.append(exc)

    worker = threading.Thread(target=probe)
    worker.start()
    worker.join()
    if failure:
        raise UserError(
            "the connection passed as sqlite_store(database=...) works only in the thread that "
            "made it, but the agent saves from its own thread. Open it with "
            "sqlite3.connect(..., check_same_thread=False)"
        )
