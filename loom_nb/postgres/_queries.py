"""The PostgreSQL store's statements, with the schema's name quoted in once."""

from __future__ import annotations

from loom_nb._message_rows import THREAD_COLUMNS

#: The server's clock, in microseconds since the epoch (what lease times are kept in).
_NOW_US = "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint"


class Queries:
    """Every statement, with the schema name quoted in once."""

    def __init__(self, name: str) -> None:
        s = '"' + name.replace('"', '""') + '"'
        self.set_user = "SELECT set_config('loom.user_id', %s, true)"
        self.snapshot = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"
        self.save = f"""
            INSERT INTO {s}.threads (id, agent, user_id, title, created_at, updated_at,
                updated_us, pending, pending_count, error, changes)
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, {_NOW_US})
            ON CONFLICT (id) DO UPDATE SET
                agent = excluded.agent, user_id = excluded.user_id, title = excluded.title,
                created_at = excluded.created_at, updated_at = excluded.updated_at,
                updated_us = excluded.updated_us, pending = excluded.pending,
                pending_count = excluded.pending_count, error = excluded.error,
                changes = threads.changes + 1"""
        self.append = f"""
            WITH touched AS (
                UPDATE {s}.threads SET message_count = message_count + 1, updated_at = %s,
                    updated_us = %s, changes = changes + 1
                WHERE id = %s RETURNING message_count
            )
            INSERT INTO {s}.messages (thread_id, seq, role, created_at, json, data, search)
            SELECT %s, message_count - 1, %s, %s, %s, %s, %s FROM touched
            RETURNING seq"""
        self.set_pending = (
            f"UPDATE {s}.threads SET pending = %s, pending_count = %s, changes = changes + 1 "
            "WHERE id = %s"
        )
        self.pending = f"SELECT pending FROM {s}.threads WHERE id = %(id)s AND "
        self.take = f"""
            UPDATE {s}.threads SET lease_holder = %(holder)s,
                lease_until_us = {_NOW_US} + %(us)s
            WHERE id = %(id)s AND (lease_holder IS NULL OR lease_until_us <= {_NOW_US}
                OR lease_holder = %(holder)s OR lease_holder = %(replacing)s) AND """
        self.lease = f"SELECT lease_holder, lease_until_us FROM {s}.threads WHERE id = %(id)s AND "
        self.free = f"""
            UPDATE {s}.threads SET lease_holder = NULL, lease_until_us = NULL, error = %(error)s,
                changes = changes + 1
            WHERE id = %(id)s AND lease_holder = %(holder)s AND """
        self.version = f"SELECT changes, message_count FROM {s}.threads WHERE id = %(id)s AND "
        # and whether its lease lapsed, by the server's clock (the one clock of every kernel)
        self.thread = (
            f"SELECT {THREAD_COLUMNS}, lease_until_us <= {_NOW_US} FROM {s}.threads "
            "WHERE id = %(id)s AND "
        )
        self.messages = f"SELECT json, data FROM {s}.messages WHERE thread_id = %(id)s ORDER BY seq"
        self.listing = f"SELECT {THREAD_COLUMNS} FROM {s}.threads WHERE "
        self.order = " ORDER BY updated_us DESC, made"
        self.save_rule = (
            f"INSERT INTO {s}.rules (id, agent, user_id, thread_id, json, created_us) "
            f"VALUES (%s, %s, %s, %s, %s, {_NOW_US})"
        )
        self.rules = (
            f"SELECT json FROM {s}.rules WHERE agent = %(agent)s AND revoked_at IS NULL AND "
        )
        self.revoke_rule = (
            f"UPDATE {s}.rules SET revoked_at = %(when)s "
            "WHERE id = %(id)s AND revoked_at IS NULL AND "
        )
        # Candidates from the word index (every word of the text is a word of the message),
        # then the exact casefolded text on those rows, unless the text is one plain word,
        # which a word of the message already contains; messages too long for the index, and
        # text without a word at all, by the text alone. One condition, so the planner may
        # also walk threads newest first and stop at ``limit`` (a very common word). The
        # exact text is ``LIKE '%text%'`` (wildcards escaped) byte for byte (``"C"``): what
        # ``strpos`` finds, at a fraction of its cost per row (no character counting). The
        # index holds no positions, so ``phraseto_tsquery`` cannot narrow the candidates.
        words = "plainto_tsquery('simple'::regconfig, %(needle)s)"
        contains = 'search LIKE %(pattern)s COLLATE "C"'
        self.found = f"""
            id IN (
                SELECT thread_id FROM {s}.messages
                WHERE (words @@ {words} AND (%(one_word)s OR {contains}))
                    OR ((words IS NULL OR numnode({words}) = 0) AND {contains})
            )"""
        self.delete = f"DELETE FROM {s}.threads WHERE id = %(id)s AND "
