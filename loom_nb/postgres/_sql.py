"""SQL an admin runs once, as the owner of the store's schema: least-privilege grants for the
role kernels connect as, and optional row level security per user."""

from __future__ import annotations


def _ident(name: str) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"expected a role or schema name, got {name!r}")
    return '"' + name.replace('"', '""') + '"'


def grants_sql(role: str, *, schema: str = "loom") -> str:
    """What ``role`` needs to use a store whose schema exists, and nothing more.

    Run it as the schema's owner (the role that opened the store first, which created and
    migrates the tables). The role may then save, append, list, search and delete threads, but
    not create, alter or drop anything. Tables that later loom_nb versions add get the same
    privileges (default privileges), so upgrades need no new grants.
    """
    r, s = _ident(role), _ident(schema)
    return f"""\
GRANT USAGE ON SCHEMA {s} TO {r};
GRANT SELECT ON {s}.migrations TO {r};
GRANT SELECT, INSERT, UPDATE, DELETE ON {s}.threads TO {r};
GRANT SELECT, INSERT ON {s}.messages TO {r};
GRANT SELECT, INSERT, UPDATE ON {s}.rules TO {r};
GRANT SELECT, INSERT ON {s}.eval_suites TO {r};
ALTER DEFAULT PRIVILEGES IN SCHEMA {s} GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {r};
"""


def row_level_security_sql(schema: str = "loom", *, supabase: bool = False) -> str:
    """Policies that keep each user's threads (and their messages) to that user.

    The store sets ``loom.user_id`` in each of its transactions to the user it scopes to (the
    agent's ``auth`` hook), and the policies read it: a query that forgot its scope still sees
    only that user's rows. With them on, every thread needs a user (an agent with ``auth``).
    The store's role must not own the tables: owners and superusers bypass these policies.

    ``supabase=True`` also lets signed-in Supabase users read their own threads through the
    project's API (the ``authenticated`` role, ``auth.uid()``), for example from a web app.
    """
    s = _ident(schema)
    user = "nullif(current_setting('loom.user_id', true), '')"
    own_thread = f"EXISTS (SELECT 1 FROM {s}.threads t WHERE t.id = thread_id)"
    out = f"""\
ALTER TABLE {s}.threads ENABLE ROW LEVEL SECURITY;
CREATE POLICY loom_user_threads ON {s}.threads
    USING (user_id = {user}) WITH CHECK (user_id = {user});
ALTER TABLE {s}.messages ENABLE ROW LEVEL SECURITY;
CREATE POLICY loom_user_messages ON {s}.messages
    USING ({own_thread}) WITH CHECK ({own_thread});
ALTER TABLE {s}.rules ENABLE ROW LEVEL SECURITY;
CREATE POLICY loom_user_rules ON {s}.rules
    USING (user_id = {user}) WITH CHECK (user_id = {user});
ALTER TABLE {s}.eval_suites ENABLE ROW LEVEL SECURITY;
CREATE POLICY loom_user_eval_suites ON {s}.eval_suites
    USING (user_id = {user}) WITH CHECK (user_id = {user});
"""
    if supabase:
        out += f"""\
GRANT USAGE ON SCHEMA {s} TO authenticated;
GRANT SELECT ON {s}.threads, {s}.messages TO authenticated;
CREATE POLICY loom_supabase_threads ON {s}.threads FOR SELECT TO authenticated
    USING (user_id = (SELECT auth.uid())::text);
CREATE POLICY loom_supabase_messages ON {s}.messages FOR SELECT TO authenticated
    USING ({own_thread});
"""
    return out
