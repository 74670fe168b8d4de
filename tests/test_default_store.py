"""With no ``store=``, an agent keeps threads where ``LOOM_STORE`` says, else in
``.loom/loom.db`` beside the notebook, so they survive a kernel restart."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from loom_nb import ReplayModel, Reply, UserError, define_agent, memory_store
from loom_nb._store import describe, store_from_env
from loom_nb.sqlite import SQLiteStore, sqlite_store


def test_the_test_suite_gives_every_test_its_own_default_store(tmp_path: Path):
    assert os.environ["LOOM_STORE"].startswith(str(tmp_path))


def test_without_loom_store_threads_go_to_dot_loom_beside_the_notebook(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("LOOM_STORE")
    monkeypatch.chdir(tmp_path)  # a kernel's working folder is its notebook's
    agent = define_agent(name="a", model=ReplayModel([Reply(text="hello")]))
    assert isinstance(agent.store, SQLiteStore)
    assert describe(agent.store) == "SQLite file .loom/loom.db"
    agent.run_sync("hi")
    assert (tmp_path / ".loom" / "loom.db").is_file()


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("{tmp}/threads.db", "{tmp}/threads.db"),
        ("sqlite:///rel/threads.db", "rel/threads.db"),
        ("sqlite:///{tmp}/abs.db", "{tmp}/abs.db"),
        ("  {tmp}/spaces.db  ", "{tmp}/spaces.db"),
    ],
)
def test_loom_store_names_a_sqlite_file(
    spec: str, expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LOOM_STORE", spec.format(tmp=tmp_path))
    store = store_from_env()
    assert describe(store) == f"SQLite file {expected.format(tmp=tmp_path)}"
    assert (tmp_path / expected.format(tmp=tmp_path)).is_file()


def test_agents_share_the_default_store_and_a_closed_one_is_opened_again():
    first = define_agent(name="a", model=ReplayModel([]))
    second = define_agent(name="b", model=ReplayModel([]))
    assert first.store is second.store
    first.store.close()
    third = define_agent(name="c", model=ReplayModel([]))
    assert third.store is not first.store
    assert third.store.list() == []


@pytest.mark.parametrize(
    "spec",
    [
        "mysql://db/x",
        "mysql://me:s3cret@db/x",
        "https://example.test/store",
        "sqlite://",
        "postgresql:/db",  # one slash short of a URL
        "sqlite:threads.db",
        "foo=bar password=s3cret",  # the keyword form, but no keyword libpq knows
        "host=db password=s3 cret",  # a keyword, then a word without "="
        "a=b.db",
    ],
)
def test_a_loom_store_that_names_no_known_store_is_a_clear_error_and_no_file(
    spec: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LOOM_STORE", spec)
    with pytest.raises(UserError, match="LOOM_STORE") as caught:
        define_agent(name="a", model=ReplayModel([]))
    said = str(caught.value)
    assert "LOOM_STORE" in said and "SQLite file path" in said, said
    assert "postgresql://" in said and "host=HOST port=5432 dbname=DATABASE" in said, said
    assert "s3" not in said and "cret" not in said, said  # a password is never echoed
    assert list(tmp_path.iterdir()) == []


def test_a_file_whose_name_looks_like_a_setting_is_named_with_a_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LOOM_STORE", "./a=b:c.db")
    assert describe(store_from_env()) == "SQLite file ./a=b:c.db"
    assert (tmp_path / "a=b:c.db").is_file()


@pytest.mark.parametrize(
    "spec",
    [
        "host=127.0.0.1 port={port} dbname=loom user=loom password=s3cret",
        "  dbname = loom host=127.0.0.1 port={port} password='s3 cret'",
    ],
)
def test_libpq_keyword_form_goes_to_postgres_store_not_a_file(
    spec: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """No server listens on the port, so postgres_store's own connect error comes back (a real
    server reached through this form: tests/postgres/test_postgres.py)."""
    from loom_nb.postgres import PostgresStoreError
    from tests.postgres_server import free_port

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LOOM_STORE", spec.format(port=free_port()))
    with pytest.raises(PostgresStoreError, match=r"127\.0\.0\.1") as caught:
        define_agent(name="a", model=ReplayModel([]))
    assert "s3" not in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_threads_survive_a_kernel_restart_by_default(tmp_path: Path):
    code = """
import sys
from loom_nb import ReplayModel, Reply, define_agent
agent = define_agent(name="a", model=ReplayModel([Reply(text="saved")]))
if sys.argv[1] == "run":
    print(agent.run_sync("remember this").thread_id)
else:
    print([t.id for t in agent.threads()], agent.thread(sys.argv[1]).last_text)
"""
    env = {k: v for k, v in os.environ.items() if k != "LOOM_STORE"}

    def kernel(arg: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", code, arg],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.strip()

    thread_id = kernel("run")
    assert kernel(thread_id) == f"[{thread_id!r}] saved"


def test_every_store_says_where_it_keeps_threads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    from IPython.core.interactiveshell import InteractiveShell

    # the line %loom threads prints above the threads: where they are, and what that means
    shell = InteractiveShell.instance()
    shell.run_cell("%load_ext loom_nb", store_history=False)
    with sqlite_store(tmp_path / "team.db") as kept:
        shell.user_ns["scratch"] = define_agent(
            name="scratch", model=ReplayModel([]), store=memory_store()
        )
        shell.user_ns["team"] = define_agent(name="team", model=ReplayModel([]), store=kept)
        capsys.readouterr()
        try:
            for name, said in [
                ("scratch", "threads in memory (lost when the kernel stops)"),
                ("team", f"threads in SQLite file {tmp_path / 'team.db'}"),
            ]:
                assert shell.run_cell(f"%loom threads {name}", store_history=False).success
                assert capsys.readouterr().out.splitlines()[0] == said
        finally:
            del shell.user_ns["scratch"], shell.user_ns["team"]

    class Bare:  # a store of the user's own without describe(): named by its class
        pass

    assert describe(Bare()) == "Bare"  # type: ignore[arg-type]
