"""How the PostgreSQL store writes the steps of ``loom_nb._sql_stores.steps``: ``%(name)s``
placeholders, the row held by ``FOR UPDATE``, and the server's clock, the one clock of every
kernel, by which a lease lapses."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg

from loom_nb._messages import Message
from loom_nb._sql_stores.rows import message_row, sort_key
from loom_nb._sql_stores.steps import Dialect

#: The server's clock, in microseconds since the epoch (what lease times are kept in).
NOW_US = "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint"


class PostgresDialect(Dialect):
    """The PostgreSQL store's statements in the schema ``name``, quoted in once."""

    changes = "changes"
    clock = NOW_US
    lock = " FOR UPDATE"
    lapse = f"lease_until_us <= {NOW_US}"
    length_column = None

    def __init__(self, name: str) -> None:
        s = '"' + name.replace('"', '""') + '"'
        self.threads = f"{s}.threads"
        # One statement: the thread's row counts the message and gives it the next seq, so a
        # message is never half-written and kernels appending to one thread queue on the row.
        self._append = f"""
            WITH touched AS (
                UPDATE {s}.threads SET message_count = message_count + 1, updated_at = %s,
                    updated_us = %s, changes = changes + 1
                WHERE id = %s RETURNING message_count
            )
            INSERT INTO {s}.messages (thread_id, seq, role, created_at, json, data, search)
            SELECT %s, message_count - 1, %s, %s, %s, %s, %s FROM touched
            RETURNING seq"""

    def param(self, name: str) -> str:
        return f"%({name})s"

    def lapsed(self, holder: str, until: int, lapse: Any) -> bool:
        return bool(lapse)  # by the server's clock, read with the row

    def add_message(
        self, conn: psycopg.Connection[Any], thread_id: str, updated: datetime, message: Message
    ) -> bool:
        role, created_at, text, data, search = message_row(message)
        params = (
            updated.isoformat(),
            sort_key(updated),
            thread_id,
            thread_id,
            role,
            created_at,
            text,
            data,
            search.replace("\x00", ""),  # PostgreSQL text holds no NUL; search ignores them
        )
        return conn.execute(self._append, params).fetchone() is not None
