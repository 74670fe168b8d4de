"""The PostgreSQL store's reads and its delete, with the schema's name quoted in once."""

from __future__ import annotations

from loom_nb._sql_stores.rows import THREAD_COLUMNS
from loom_nb.postgres._dialect import NOW_US


class Queries:
    """Every statement but the SQL stores' steps (``_dialect`` writes those), with the schema
    name quoted in once."""

    def __init__(self, name: str) -> None:
        s = '"' + name.replace('"', '""') + '"'
        self.set_user = "SELECT set_config('loom.user_id', %s, true)"
        self.snapshot = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"
        self.version = f"SELECT changes, message_count FROM {s}.threads WHERE id = %(id)s AND "
        # and whether its lease lapsed, by the server's clock (the one clock of every kernel)
        self.thread = (
            f"SELECT {THREAD_COLUMNS}, lease_until_us <= {NOW_US} FROM {s}.threads "
            "WHERE id = %(id)s AND "
        )
        self.messages = f"SELECT json, data FROM {s}.messages WHERE thread_id = %(id)s ORDER BY seq"
        self.listing = f"SELECT {THREAD_COLUMNS} FROM {s}.threads WHERE "
        self.order = " ORDER BY updated_us DESC, made"
        self.save_rule = (
            f"INSERT INTO {s}.rules (id, agent, user_id, thread_id, json, created_us) "
            f"VALUES (%s, %s, %s, %s, %s, {NOW_US})"
        )
        self.rules = (
            f"SELECT json FROM {s}.rules WHERE agent = %(agent)s AND revoked_at IS NULL AND "
        )
        self.add_to_suite = (
            f"INSERT INTO {s}.eval_suites (agent, user_id, suite, thread_id) "
            "SELECT %(agent)s, %(user)s, %(suite)s, %(thread)s WHERE NOT EXISTS (SELECT 1 FROM "
            f"{s}.eval_suites WHERE agent = %(agent)s AND user_id IS NOT DISTINCT FROM "
            "%(user)s AND suite = %(suite)s AND thread_id = %(thread)s)"
        )
        self.suites = f"SELECT suite, thread_id FROM {s}.eval_suites WHERE "
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
