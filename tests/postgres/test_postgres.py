"""The PostgreSQL store beyond the shared contract: least privileges, row level security, its
schema's versions, search through the word index, connections and their faults.

The contract itself (round trips, scoping, search, listing, delete) is tests/stores/.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from loom_nb import (
    Message,
    ReplayModel,
    Reply,
    StoreError,
    Thread,
    UserError,
    define_agent,
)
from loom_nb.postgres import (
    PostgresStore,
    PostgresStoreError,
    grants_sql,
    postgres_store,
    row_level_security_sql,
)
from loom_nb.postgres import _schema as schema
from tests.postgres_server import LoomDatabase, Postgres, free_port

pytestmark = pytest.mark.postgres


@pytest.fixture
def store(loom_database: LoomDatabase, postgres_schema: str) -> Iterator[PostgresStore]:
    """A store connected as the least-privileged app role."""
    opened = postgres_store(loom_database.dsn(), schema=postgres_schema)
    yield opened
    opened.close()


def make(store: Any, thread_id: str, *texts: str, user: str | None = None) -> Thread:
    thread = Thread(id=thread_id, agent="a", user_id=user)
    store.save_thread(thread)
    for text in texts:
        message = Message.user(text)
        thread.messages.append(message)
        store.append(thread, message)
    return thread


def table_state(database: LoomDatabase, name: str) -> list[Any]:
    """Every row of every table in the schema, to show that nothing changed."""
    with database.connect() as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
            "ORDER BY table_name",
            (name,),
        ).fetchall()
        out: list[Any] = []
        for (table,) in tables:
            query = sql.SQL("SELECT * FROM {}.{} ORDER BY 1").format(
                sql.Identifier(name), sql.Identifier(table)
            )
            out.append((table, [tuple(map(str, row)) for row in conn.execute(query)]))
        return out


# ---- least privileges ------------------------------------------------------------------------


def test_the_store_runs_as_a_role_that_owns_nothing_and_may_create_nothing(
    store: PostgresStore, loom_database: LoomDatabase, postgres_schema: str
):
    make(store, "t1", "hello")
    with psycopg.connect(loom_database.dsn(), autocommit=True) as conn:
        who = conn.execute(
            "SELECT rolsuper, rolcreaterole, rolcreatedb, rolbypassrls FROM pg_roles "
            "WHERE rolname = current_user"
        ).fetchone()
        assert who == (False, False, False, False)
        owners = conn.execute(
            "SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = %s", (postgres_schema,)
        ).fetchall()
        assert owners == [(loom_database.owner,)]
        for statement in (
            "CREATE TABLE {}.x (a int)",
            "DROP TABLE {}.messages",
            "ALTER TABLE {}.threads ADD COLUMN x int",
            "DELETE FROM {}.migrations",
            "UPDATE {}.messages SET json = '{{}}'",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match=r"denied|owner"):
                conn.execute(sql.SQL(statement).format(sql.Identifier(postgres_schema)))


def test_a_role_without_grants_is_told_what_to_run(loom_database: LoomDatabase):
    name = "t_nogrants"
    postgres_store(loom_database.dsn(loom_database.owner), schema=name).close()
    try:
        with pytest.raises(PostgresStoreError, match=r"permission denied.*grants_sql"):
            postgres_store(loom_database.dsn(), schema=name)
    finally:
        loom_database.drop_schema(name)


def test_a_role_that_may_not_create_the_schema_is_told_who_can(loom_database: LoomDatabase):
    with pytest.raises(PostgresStoreError, match=r"permission denied.*owner") as caught:
        postgres_store(loom_database.dsn(), schema="t_missing")
    assert isinstance(caught.value, UserError)


def test_the_grants_sql_quotes_names():
    text = grants_sql('we"ird', schema="Team Threads")
    assert 'TO "we""ird";' in text and '"Team Threads".threads' in text
    with pytest.raises(ValueError, match="role or schema name"):
        grants_sql("")


# ---- schema versions -------------------------------------------------------------------------


def test_a_schema_from_a_newer_version_is_refused_and_left_alone(
    loom_database: LoomDatabase, postgres_schema: str
):
    with loom_database.connect() as conn:
        conn.execute(
            sql.SQL("INSERT INTO {}.migrations (name) VALUES ('m999_from_the_future')").format(
                sql.Identifier(postgres_schema)
            )
        )
    before = table_state(loom_database, postgres_schema)
    for role in (loom_database.app, loom_database.owner):
        with pytest.raises(PostgresStoreError, match=r"newer loom_nb.*m999_from_the_future"):
            postgres_store(loom_database.dsn(role), schema=postgres_schema)
    assert table_state(loom_database, postgres_schema) == before


def to_previous_version(database: LoomDatabase, name: str) -> None:
    """Undo the last migration (m006: the eval suites table), as the owner: the schema as the
    previous loom_nb left it, its grants included."""
    with database.connect() as conn:
        conn.execute(
            sql.SQL("DELETE FROM {}.migrations WHERE name = %s").format(sql.Identifier(name)),
            (schema.MIGRATIONS[-1].__name__,),
        )
        conn.execute(sql.SQL("DROP TABLE {}.eval_suites").format(sql.Identifier(name)))


def test_an_older_schema_needs_its_owner_to_upgrade_it(
    loom_database: LoomDatabase, postgres_schema: str
):
    to_previous_version(loom_database, postgres_schema)
    with pytest.raises(PostgresStoreError, match="owner"):
        postgres_store(loom_database.dsn(), schema=postgres_schema)
    owner = postgres_store(loom_database.dsn(loom_database.owner), schema=postgres_schema)
    assert owner.schema_version == schema.VERSION
    owner.close()
    app = postgres_store(loom_database.dsn(), schema=postgres_schema)
    make(app, "t1", "works again")
    assert [t.id for t in app.search("works")] == ["t1"]
    app.close()


def test_an_app_role_meeting_an_older_schema_is_told_what_it_lacks_and_who_upgrades_it(
    loom_database: LoomDatabase, postgres_schema: str, monkeypatch: pytest.MonkeyPatch
):
    to_previous_version(loom_database, postgres_schema)
    before = table_state(loom_database, postgres_schema)
    with pytest.raises(PostgresStoreError, match="older loom_nb") as caught:
        postgres_store(loom_database.dsn(), schema=postgres_schema)
    said = str(caught.value)
    assert f"schema {postgres_schema!r}" in said and "older loom_nb" in said, said
    assert schema.MIGRATIONS[-1].__name__ in said and "loom_owner" not in said, said
    assert "once connected as the schema's owner" in said, said
    assert table_state(loom_database, postgres_schema) == before  # nothing was touched
    # a hub's kernels meet it at define_agent, with the same words
    loom_database.new_schema("loom")
    try:
        to_previous_version(loom_database, "loom")
        monkeypatch.setenv("LOOM_STORE", loom_database.dsn())
        with pytest.raises(PostgresStoreError, match=r"schema 'loom' .* older loom_nb"):
            define_agent(name="a", model=ReplayModel([]))
    finally:
        loom_database.drop_schema("loom")


_OPEN_AND_SAVE = """
import sys
from loom_nb import Thread
from loom_nb.postgres import postgres_store
try:
    store = postgres_store(sys.argv[1], schema=sys.argv[2])
    store.save_thread(Thread(id="t1", agent="a"))
    print("ok", store.schema_version)
except Exception as exc:
    print(type(exc).__name__, exc)
"""


def test_an_app_kernel_opening_while_the_owner_upgrades_waits_for_it_and_works(
    loom_database: LoomDatabase, postgres_schema: str
):
    to_previous_version(loom_database, postgres_schema)
    with loom_database.connect() as owner:  # the owner's upgrade, as postgres_store runs it
        owner.execute("BEGIN")
        schema.lock(owner, postgres_schema)
        kernel = subprocess.Popen(
            [sys.executable, "-c", _OPEN_AND_SAVE, loom_database.dsn(), postgres_schema],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        with loom_database.server.connect() as admin:  # the kernel waits for the upgrade
            deadline, waiting = time.monotonic() + 60, None
            while waiting is None and kernel.poll() is None and time.monotonic() < deadline:
                waiting = admin.execute(
                    "SELECT pid FROM pg_stat_activity WHERE application_name = 'loom_nb' "
                    "AND wait_event = 'advisory'"
                ).fetchone()
                time.sleep(0.02)
        assert waiting is not None, kernel.communicate(timeout=30)
        schema.migrate(owner, postgres_schema, schema.applied(owner, postgres_schema) or [])
        owner.execute("COMMIT")
    out, err = kernel.communicate(timeout=60)
    assert out.strip() == f"ok {schema.VERSION}", out + err


def test_kernels_opening_a_new_schema_at_once_migrate_it_once(loom_database: LoomDatabase):
    name, errors, stores = "t_race", [], []

    def open_one() -> None:
        try:
            stores.append(postgres_store(loom_database.dsn(loom_database.owner), schema=name))
        except Exception as exc:  # pragma: no cover - the assertion shows it
            errors.append(exc)

    workers = [threading.Thread(target=open_one) for _ in range(4)]
    try:
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        assert errors == [] and len(stores) == 4
        assert all(s.schema_version == schema.VERSION for s in stores)
    finally:
        for s in stores:
            s.close()
        loom_database.drop_schema(name)


# ---- row level security ----------------------------------------------------------------------


def test_row_level_security_keeps_each_users_threads_to_that_user(
    loom_database: LoomDatabase, postgres_schema: str
):
    with loom_database.connect() as conn:
        conn.execute(row_level_security_sql(postgres_schema))
    store = postgres_store(loom_database.dsn(), schema=postgres_schema)
    ann = make(store, "ann-1", "ann's plan", user="ann")
    make(store, "bob-1", "bob's plan", user="bob")
    loaded = store.load("ann-1", user_id="ann")
    assert loaded is not None and loaded.messages[0].text == "ann's plan"
    assert [t.id for t in store.search("plan", user_id="ann")] == ["ann-1"]
    assert store.load("ann-1", user_id="bob") is None
    ann.title = "renamed"
    store.save_thread(ann)

    # Raw queries as the same role see only what the setting allows.
    s = sql.Identifier(postgres_schema)
    with psycopg.connect(loom_database.dsn(), autocommit=True) as conn:
        count = sql.SQL(
            "SELECT (SELECT count(*) FROM {}.threads), (SELECT count(*) FROM {}.messages)"
        )
        assert conn.execute(count.format(s, s)).fetchone() == (0, 0)
        conn.execute("SELECT set_config('loom.user_id', 'bob', false)")
        assert conn.execute(count.format(s, s)).fetchone() == (1, 1)
        rows = conn.execute(sql.SQL("SELECT id FROM {}.threads").format(s)).fetchall()
        assert rows == [("bob-1",)]
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            conn.execute(
                sql.SQL(
                    "INSERT INTO {}.messages (thread_id, seq, role, created_at, json, search) "
                    "VALUES ('ann-1', 9, 'user', '', '{{}}', '')"
                ).format(s)
            )
        assert conn.execute(sql.SQL("DELETE FROM {}.threads").format(s)).rowcount == 1

    with pytest.raises(PostgresStoreError, match="every thread needs a user"):
        make(store, "nobody", "no auth")
    assert store.delete("ann-1", user_id="ann") and store.list(user_id="ann") == []
    store.close()


def test_supabase_users_read_their_own_threads_through_the_api_role(
    loom_database: LoomDatabase, postgres_schema: str, postgres_server: Postgres
):
    ann, bob = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa", "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb"
    with psycopg.connect(
        postgres_server.dsn(dbname=loom_database.dbname), autocommit=True
    ) as admin:  # what a Supabase project already has: the role, auth.uid()
        if admin.execute("SELECT 1 FROM pg_roles WHERE rolname = 'authenticated'").fetchone():
            pass
        else:
            admin.execute("CREATE ROLE authenticated NOLOGIN NOINHERIT")
        admin.execute("CREATE SCHEMA IF NOT EXISTS auth")
        admin.execute(
            "CREATE OR REPLACE FUNCTION auth.uid() RETURNS uuid LANGUAGE sql STABLE AS $$ "
            "SELECT nullif(coalesce(nullif(current_setting('request.jwt.claims', true), ''), "
            "'{}')::jsonb ->> 'sub', '')::uuid $$"
        )
        admin.execute(f"GRANT USAGE ON SCHEMA auth TO authenticated, {loom_database.owner}")
    with loom_database.connect() as conn:
        conn.execute(row_level_security_sql(postgres_schema, supabase=True))
    store = postgres_store(loom_database.dsn(), schema=postgres_schema)
    make(store, "ann-1", "ann's plan", user=ann)
    make(store, "bob-1", "bob's plan", user=bob)
    store.close()
    s = sql.Identifier(postgres_schema)
    with psycopg.connect(postgres_server.dsn(dbname=loom_database.dbname)) as api:
        api.execute("SET ROLE authenticated")  # as PostgREST does for a signed-in user's JWT
        api.execute(
            "SELECT set_config('request.jwt.claims', %s, true)",
            (json.dumps({"sub": ann, "role": "authenticated"}),),
        )
        threads = api.execute(sql.SQL("SELECT id FROM {}.threads").format(s)).fetchall()
        messages = api.execute(sql.SQL("SELECT thread_id FROM {}.messages").format(s)).fetchall()
        assert threads == [("ann-1",)] and messages == [("ann-1",)]
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
            api.execute(sql.SQL("DELETE FROM {}.threads").format(s))


# ---- search through the word index -----------------------------------------------------------


def test_search_finds_whole_words_not_pieces_of_words(store: PostgresStore):
    make(store, "t1", "Total revenue by month")
    assert [t.id for t in store.search("revenue")] == ["t1"]
    assert [t.id for t in store.search("total revenue by")] == ["t1"]
    for piece in ("venue", "reve", "otal revenue", "total rev"):  # SQLite and memory find these
        assert store.search(piece) == []


def test_search_uses_the_word_index(store: PostgresStore, loom_database: LoomDatabase):
    for i in range(50):
        make(store, f"t{i}")
    with loom_database.connect() as conn:
        conn.execute(
            sql.SQL(
                "INSERT INTO {s}.messages (thread_id, seq, role, created_at, json, search) "
                "SELECT 't' || (g % 50), g, 'user', '', '{{}}', 'filler text number ' || g "
                "FROM generate_series(0, 9999) g"
            ).format(s=sql.Identifier(store.schema))
        )
        for table in ("threads", "messages"):  # as autovacuum does after many inserts
            names = map(sql.Identifier, (store.schema, table))
            conn.execute(sql.SQL("VACUUM ANALYZE {}.{}").format(*names))
    query = f"{store._q.listing}user_id IS NULL AND {store._q.found}{store._q.order} LIMIT 5"
    with psycopg.connect(loom_database.dsn(), autocommit=True) as conn:
        plan = "\n".join(
            row[0]
            for row in conn.execute(
                "EXPLAIN " + query, {"needle": "4242", "pattern": "%4242%", "one_word": False}
            )
        )
    assert "Bitmap Index Scan on messages_words" in plan, plan
    assert [t.id for t in store.search("number 4242")] == ["t42"]


def test_messages_too_long_for_the_word_index_are_still_found(store: PostgresStore):
    long_text = "word " * (schema.INDEXED_CHARS // 5) + "needle at the very end"
    make(store, "long", long_text)
    make(store, "short", "a short one")
    assert [t.id for t in store.search("needle at the very end")] == ["long"]
    assert [t.id for t in store.search("short")] == ["short"]


# ---- connections -----------------------------------------------------------------------------


def test_a_connection_or_pool_you_pass_is_used_and_left_open(
    loom_database: LoomDatabase, postgres_schema: str
):
    from psycopg_pool import ConnectionPool

    with psycopg.connect(loom_database.dsn()) as conn:  # not autocommit: the store copes
        store = postgres_store(connection=conn, schema=postgres_schema)
        make(store, "t1", "via my connection")
        store.close()
        assert not conn.closed
        assert conn.execute("SELECT 1").fetchone() == (1,)
    with ConnectionPool(loom_database.dsn(), min_size=1, max_size=2) as pool:
        store = postgres_store(pool=pool, schema=postgres_schema)
        loaded = store.load("t1")
        assert loaded is not None and loaded.messages[0].text == "via my connection"
        store.close()
        with pool.connection() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)


def test_the_store_names_its_database_and_never_the_password(
    store: PostgresStore, loom_database: LoomDatabase
):
    port = loom_database.server.port
    expected = f"PostgreSQL loom_app@127.0.0.1:{port}/loom_tests schema {store.schema}"
    assert store.describe() == expected
    assert loom_database.password not in repr(store) + store.describe()


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"dsn": "x", "connection": object()}, "one of"),
        ({"connection": object()}, "psycopg.Connection"),
        ({"pool": object()}, "ConnectionPool"),
        ({"dsn": "host=127.0.0.1", "schema": ""}, "schema name"),
        ({"dsn": "not a connection string ==="}, "cannot read the connection string"),
    ],
)
def test_wrong_arguments_are_clear_errors(arguments: dict[str, Any], message: str):
    with pytest.raises(UserError, match=message):
        postgres_store(**arguments)


# ---- faults ----------------------------------------------------------------------------------


def test_a_wrong_password_or_a_missing_database_is_one_clear_error(loom_database: LoomDatabase):
    port = loom_database.server.port
    base = f"postgresql://loom_app:{{}}@127.0.0.1:{port}/{{}}"
    cases = [
        (base.format("wrong", "loom_tests"), r"password authentication failed.*check the password"),
        (base.format(loom_database.password, "nodb"), r'"nodb" does not exist.*CREATE DATABASE'),
        (f"postgresql://nobody:x@127.0.0.1:{port}/loom_tests", r"(role|password).*nobody"),
        (f"postgresql://a:b@127.0.0.1:{free_port()}/x", r"refused.*start the server"),
    ]
    for dsn, message in cases:
        with pytest.raises(PostgresStoreError, match=message) as caught:
            postgres_store(dsn)
        assert "wrong" not in str(caught.value) or "password" in str(caught.value)
        assert isinstance(caught.value, UserError)


def test_a_wrong_password_in_loom_store_fails_when_the_agent_is_defined(
    loom_database: LoomDatabase, monkeypatch: pytest.MonkeyPatch
):
    port = loom_database.server.port
    monkeypatch.setenv("LOOM_STORE", f"postgresql://loom_app:nope@127.0.0.1:{port}/loom_tests")
    with pytest.raises(PostgresStoreError, match="password authentication failed"):
        define_agent(name="a", model=ReplayModel([]))


@pytest.mark.parametrize("form", ["url", "keywords"])
def test_loom_store_names_a_postgresql_database(
    form: str, loom_database: LoomDatabase, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    monkeypatch.chdir(tmp_path)
    loom_database.new_schema("loom")
    try:
        db = loom_database
        monkeypatch.setenv(
            "LOOM_STORE",
            db.dsn()
            if form == "url"  # libpq's keyword form, as postgres_store reads it
            else f"host=127.0.0.1 port={db.server.port} dbname={db.dbname} user={db.app} "
            f"password='{db.password}'",
        )
        agent = define_agent(name="a", model=ReplayModel([Reply(text="hello")]))
        assert agent.store.describe().startswith("PostgreSQL loom_app@")  # type: ignore[attr-defined]
        assert agent.store.describe().endswith("schema loom")  # type: ignore[attr-defined]
        result = agent.run_sync("hi")
        again = define_agent(name="a", model=ReplayModel([]))
        assert again.store is agent.store  # one connection for every agent
        loaded = again.thread(result.thread_id)
        assert [m.text for m in loaded.messages] == ["hi", "hello"]
        assert list(tmp_path.iterdir()) == []  # no SQLite file named after the setting
    finally:
        loom_database.drop_schema("loom")


def test_the_server_restarting_between_calls_is_invisible(
    loom_database: LoomDatabase, postgres_schema: str
):
    from psycopg_pool import ConnectionPool

    own = postgres_store(loom_database.dsn(), schema=postgres_schema)
    with ConnectionPool(loom_database.dsn(), min_size=1, max_size=1) as pool:
        pooled = postgres_store(pool=pool, schema=postgres_schema)
        thread = make(own, "t1", "before")
        for mode in ("fast", "immediate"):
            loom_database.server.restart(mode)
            message = Message.user(f"after a {mode} restart")
            thread.messages.append(message)
            own.append(thread, message)  # reconnects, and writes once
            assert [m.text for m in pooled.load("t1").messages] == [  # type: ignore[union-attr]
                m.text for m in thread.messages
            ]
        pooled.close()
    own.close()


def test_your_own_connection_after_a_restart_is_a_clear_error(
    loom_database: LoomDatabase, postgres_schema: str
):
    conn = psycopg.connect(loom_database.dsn(), autocommit=True)
    store = postgres_store(connection=conn, schema=postgres_schema)
    make(store, "t1", "before")
    loom_database.server.restart()
    with pytest.raises(StoreError, match=r"loom_app@127\.0\.0\.1:\d+/loom_tests.*pass a new one"):
        store.list()
    conn.close()


def test_a_server_that_is_down_is_a_store_error_naming_it(
    loom_database: LoomDatabase, postgres_schema: str
):
    store = postgres_store(loom_database.dsn(), schema=postgres_schema)
    thread = make(store, "t1", "before")
    loom_database.server.halt()
    try:
        with pytest.raises(StoreError, match=r"PostgreSQL server loom_app@127\.0\.0\.1:\d+/loom"):
            store.append(thread, Message.user("while it is down"))
    finally:
        loom_database.server.start_again()
    loaded = store.load("t1")
    assert loaded is not None and [m.text for m in loaded.messages] == ["before"]
    store.close()


def test_the_server_going_away_mid_append_writes_nothing(
    loom_database: LoomDatabase, postgres_schema: str
):
    store = postgres_store(loom_database.dsn(), schema=postgres_schema)
    thread = make(store, "t1", "before")
    caught: list[BaseException] = []
    with loom_database.connect() as blocker:  # holds the thread's row: the append waits on it
        blocker.execute("BEGIN")
        blocker.execute(
            sql.SQL("SELECT 1 FROM {}.threads WHERE id = 't1' FOR UPDATE").format(
                sql.Identifier(postgres_schema)
            )
        )

        def append() -> None:
            try:
                store.append(thread, Message.user("half-way"))
            except BaseException as exc:
                caught.append(exc)

        worker = threading.Thread(target=append)
        worker.start()
        with loom_database.server.connect() as admin:
            deadline = time.monotonic() + 10
            pid = None
            while pid is None and time.monotonic() < deadline:
                pid = admin.execute(
                    "SELECT pid FROM pg_stat_activity WHERE application_name = 'loom_nb' "
                    "AND wait_event_type = 'Lock'"
                ).fetchone()
                time.sleep(0.01)
            assert pid is not None
            admin.execute("SELECT pg_terminate_backend(%s)", pid)  # the server ends it
        worker.join(10)
        blocker.execute("ROLLBACK")
    [error] = caught
    assert isinstance(error, StoreError)
    assert "loom_app@127.0.0.1" in str(error) and "nothing was saved" in str(error)
    loaded = store.load("t1")
    assert loaded is not None and [m.text for m in loaded.messages] == ["before"]
    assert store.list()[0].message_count == 1
    store.close()


# ---- the package -----------------------------------------------------------------------------


def test_without_psycopg_the_import_names_the_extra():
    code = (
        "import sys; sys.modules['psycopg'] = None\n"
        "try:\n    import loom_nb.postgres\n"
        "except ImportError as e:\n    print(type(e).__name__, e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("MissingExtra")
    assert "pip install 'loom-nb[postgres]'" in out.stdout


def test_row_level_security_keeps_each_users_eval_suites_to_that_user(
    loom_database: LoomDatabase, postgres_schema: str
):
    with loom_database.connect() as conn:
        conn.execute(row_level_security_sql(postgres_schema))
    store = postgres_store(loom_database.dsn(), schema=postgres_schema)
    store.add_to_suite("analyst", "default", ["ann-1", "ann-2"], user_id="ann")
    store.add_to_suite("analyst", "default", ["bob-1"], user_id="bob")
    assert store.load_suites("analyst", user_id="ann") == {"default": ["ann-1", "ann-2"]}
    assert store.load_suites("analyst", user_id="bob") == {"default": ["bob-1"]}
    s = sql.Identifier(postgres_schema)
    with psycopg.connect(loom_database.dsn(), autocommit=True) as conn:
        count = sql.SQL("SELECT count(*) FROM {}.eval_suites").format(s)
        assert conn.execute(count).fetchone() == (0,)  # no user set: no row
        conn.execute("SELECT set_config('loom.user_id', 'bob', false)")
        assert conn.execute(count).fetchone() == (1,)
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            conn.execute(
                sql.SQL(
                    "INSERT INTO {}.eval_suites (agent, user_id, suite, thread_id) "
                    "VALUES ('analyst', 'ann', 'default', 'planted')"
                ).format(s)
            )
    assert store.load_suites("analyst", user_id="ann") == {"default": ["ann-1", "ann-2"]}
    store.close()
