"""The server extension in a real ``jupyter server`` with two users (a JupyterHub-style
identity provider, token auth) under a base URL: each user reads only their threads, as JSON
and in the thread browser, whose page is tested in chromium."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest

from loom_nb.sqlite import sqlite_store
from tests.conftest import require
from tests.http import agents
from tests.http.conftest import rebuilt, validate
from tests.http.jupyter_users import TOKENS
from tests.postgres_server import free_port

pytestmark = pytest.mark.slow

REPO = Path(__file__).parents[2]
ALICE, BOB = (f"token {t}" for t in TOKENS)
BASE = "/user/team/"


class Server:
    def __init__(self, folder: Path, app: str, store: str | None = None) -> None:
        self.store_path = folder / "threads" / "loom.db"
        #: What LOOM_STORE says: the SQLite file, or a PostgreSQL URL
        self.store = store or str(self.store_path)
        home = folder / "home"
        config = home / "config"
        # the extension is enabled by the file the wheel installs (jupyter-config/)
        shutil.copytree(REPO / "jupyter-config", config)
        env = {
            **os.environ,
            "JUPYTER_CONFIG_DIR": str(config),
            "JUPYTER_DATA_DIR": str(home / "data"),
            "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
            "IPYTHONDIR": str(home / "ipython"),
            "HOME": str(home),
            "LOOM_STORE": self.store,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        }
        env.pop("JUPYTER_PATH", None)
        (folder / "root").mkdir()
        self.port = free_port()
        self.log_path = folder / "server.log"
        self.log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                app,
                "--no-browser",
                "--allow-root",
                "--ip=127.0.0.1",
                f"--port={self.port}",
                "--ServerApp.port_retries=0",
                f"--ServerApp.base_url={BASE}",
                f"--ServerApp.root_dir={folder / 'root'}",
                "--ServerApp.identity_provider_class=tests.http.jupyter_users.TwoUsers",
                f"--IdentityProvider.token={secrets.token_hex(16)}",
            ],
            cwd=folder / "root",
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.url = f"http://127.0.0.1:{self.port}{BASE}"
        self.app = app
        deadline = time.monotonic() + 120
        while True:
            assert self.process.poll() is None, self.log_path.read_text()
            try:
                if httpx.get(self.url + "api/status", headers={"Authorization": ALICE}).is_success:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, self.log_path.read_text()
            time.sleep(0.2)

    def get(self, path: str, who: str | None, **params: Any) -> httpx.Response:
        headers = {"Authorization": who} if who else {}
        return httpx.get(self.url + path, params=params, headers=headers, timeout=60)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


@pytest.fixture(scope="module", params=["jupyter_server", "jupyterlab"])
def server(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Server]:
    """``jupyter server``, and JupyterLab (the same server with its app)."""
    started = Server(tmp_path_factory.mktemp("jupyter"), request.param)
    yield started
    started.stop()


@pytest.fixture(scope="module")
def threads(server: Server) -> dict[str, Any]:
    """Threads in the server's store: alice's two, bob's one, and one made without auth."""
    store = sqlite_store(server.store_path)
    notes, team = agents.make(store, str(server.store_path.parent / "writes.txt"))
    made = {
        "alice_table": team.run_sync("table of orders", context={"user": "alice"}).thread_id,
        "alice_hostile": team.run_sync(
            "<img src=x onerror=\"document.title='pwned'\"> \u2028 $\\foo$ apple",
            context={"user": "alice"},
        ).thread_id,
        "bob": team.run_sync("bob's apple", context={"user": "bob"}).thread_id,
        "shared": notes.run_sync("for a colleague").thread_id,
    }
    store.close()
    return made


def test_each_user_reads_only_their_threads(server: Server, threads: dict[str, Any]):
    mine = server.get("loom/api/agents/team/threads", ALICE)
    assert mine.status_code == 200, mine.text
    validate(mine.json(), "threads")
    assert [t["id"] for t in mine.json()["threads"]] == [
        threads["alice_hostile"],
        threads["alice_table"],
    ]
    bobs = server.get("loom/api/agents/team/threads", BOB, q="apple").json()
    assert [t["id"] for t in bobs["threads"]] == [threads["bob"]]
    loaded = server.get("loom/api/agents/team", ALICE, threadId=threads["alice_table"])
    assert loaded.status_code == 200
    validate(loaded.json(), "thread")
    assert loaded.json()["messages"][2]["parts"][0]["data"]["total_rows"] == agents.ROWS
    foreign = server.get("loom/api/agents/team", BOB, threadId=threads["alice_table"])
    missing = server.get("loom/api/agents/team", BOB, threadId="A" * 22)
    assert foreign.status_code == missing.status_code == 404
    assert foreign.content == missing.content
    # a thread made without auth opens by its exact id for any user of the server
    for who in (ALICE, BOB):
        shared = server.get("loom/api/agents/notes", who, threadId=threads["shared"])
        assert shared.status_code == 200 and shared.json()["id"] == threads["shared"]
    near = server.get("loom/api/agents/notes", BOB, threadId=threads["shared"][:-1])
    assert near.status_code == 404
    bad = server.get("loom/api/agents/team/threads", ALICE, limit="many")
    assert bad.status_code == 400 and "whole number" in bad.json()["error"]


def test_a_frame_pages_whole_under_the_base_url(server: Server, threads: dict[str, Any]):
    loaded = server.get("loom/api/agents/team", ALICE, threadId=threads["alice_table"]).json()
    [result] = [p for m in loaded["messages"] for p in m["parts"] if p["kind"] == "tool_result"]
    first = result["data"]
    assert len(first["rows"]) == 50 and first["total_rows"] == agents.ROWS
    # the link is under the server's base URL, as the ASGI app's is under its root
    path, cursor = first["next"].split("?cursor=")
    assert (
        path
        == f"{BASE}loom/api/agents/team/threads/{threads['alice_table']}/results/"
        + (result["call_id"])
    )
    origin = server.url.removesuffix(BASE)
    pages = [rebuilt(first)]
    while cursor is not None:
        page = httpx.get(
            origin + path,
            params={"cursor": cursor, "limit": 30},
            headers={"Authorization": ALICE},
            timeout=60,
        )
        assert page.status_code == 200, page.text
        validate(page.json(), "frame_page")
        pages.append(rebuilt(page.json()["table"]))
        cursor = page.json()["next_cursor"]
    assert len(pages) == 4
    pd.testing.assert_frame_equal(pd.concat(pages), agents.frame(), check_dtype=True)
    # the results endpoint keeps the thread's scope: bob's page is the missing thread's
    foreign = httpx.get(origin + path, headers={"Authorization": BOB}, timeout=60)
    missing = server.get(f"loom/api/agents/team/threads/{'A' * 22}/results/x", BOB)
    assert foreign.status_code == missing.status_code == 404
    assert foreign.content == missing.content


def test_other_paths_under_the_api_answer_json_errors(server: Server, threads: dict[str, Any]):
    for path in ("loom/api", "loom/api/nothing", "loom/api/agents/team/threads/x/other"):
        answer = server.get(path, ALICE)
        assert answer.status_code == 404, (path, answer.text)
        assert answer.headers["content-type"] == "application/json"
        assert answer.json() == {"error": "no such endpoint"}
    # the server decides nothing: a POST (past Jupyter's XSRF check) says where a call is
    decided = httpx.post(
        server.url + f"loom/api/agents/team/threads/{threads['alice_table']}/decisions",
        json={},
        headers={"Authorization": ALICE, "X-XSRFToken": "same"},
        cookies={"_xsrf": "same"},
        timeout=30,
    )
    assert decided.status_code == 405, decided.text
    assert "thread_app" in decided.json()["error"]
    bad = server.get("loom/api/agents/team/threads/x/results/y", ALICE, cursor="-1")
    assert bad.status_code == 400 and "cursor" in bad.json()["error"]


def test_jupyters_own_auth_decides_who_may_call(server: Server, threads: dict[str, Any]):
    for path in ("loom/api/agents/team/threads", "loom/threads", "loom/api/nothing"):
        refused = server.get(path, None)
        assert refused.status_code in (302, 403), refused.text
        assert server.get(path, "token not-a-token").status_code in (302, 403)
    # a POST with a browser's cookie and no XSRF token is refused by Jupyter before anything
    cookies = httpx.get(
        server.url + "loom/threads", params={"token": next(iter(TOKENS))}, timeout=30
    ).cookies
    posted = httpx.post(server.url + "loom/api/agents/team/threads", cookies=cookies, timeout=30)
    assert posted.status_code == 403 and "_xsrf" in posted.text


def test_the_thread_browser_in_chromium(server: Server, threads: dict[str, Any], tmp_path: Path):
    from tests.notebook.browser.lab import chromium_path
    from tests.notebook.browser.page import chromium_context, playwright_available

    require(playwright_available() is None, str(playwright_available()))
    chromium = chromium_path()
    require(chromium is not None, "Debian's chromium is not installed (apt-get install chromium)")
    assert chromium is not None
    alice, bob = TOKENS
    with chromium_context(chromium, tmp_path / "profile") as context:
        page = context.new_page()
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(f"{server.url}loom/threads?token={alice}")
        rows = page.locator(".loom-thread-row")
        assert rows.count() == 2, page.content()
        assert "signed in as alice" in page.content()
        hostile = rows.nth(0).locator("a")
        assert hostile.inner_text().startswith("<img src=x onerror=")  # shown as text
        # search
        page.fill("input[name=q]", "table of")
        page.click("button[type=submit]")
        page.wait_for_url("**q=table+of**")
        assert page.locator(".loom-thread-row").count() == 1
        page.locator(".loom-thread-row a").click()
        page.wait_for_selector(".loom-thread-static")
        static = page.locator(".loom-thread-static")
        assert "table of orders" in static.inner_text()
        assert "Fetching." in static.inner_text()
        assert page.locator(".loom-thread-static table").count() >= 1  # the frame's rows
        link = page.locator(".loom-link").input_value()
        assert link.endswith(f"{BASE}loom/threads/team/{threads['alice_table']}")
        # the hostile thread draws its text inert
        shown = page.goto(f"{server.url}loom/threads/team/{threads['alice_hostile']}")
        page.wait_for_selector(".loom-thread-static")
        assert page.title() != "pwned" and dialogs == []
        assert shown is not None
        assert "default-src 'none'" in shown.headers["content-security-policy"]
        assert page.locator(".loom-thread-static img").count() == 0
        assert "onerror" in page.locator(".loom-thread-static").inner_text()
        # bob, with alice's link: the same page a missing thread gets
        other = context.browser.new_context() if context.browser else None
        bob_page = (other or context).new_page()
        bob_page.goto(f"{server.url}loom/threads?token={bob}")
        assert bob_page.locator(".loom-thread-row").count() == 1
        answer = bob_page.goto(link)
        assert answer is not None and answer.status == 404
        assert "no such thread" in bob_page.locator(".loom-error").inner_text()
        # a colleague opens a thread made without auth by its link
        shared = bob_page.goto(f"{server.url}loom/threads/notes/{threads['shared']}")
        assert shared is not None and shared.status == 200
        assert "for a colleague" in bob_page.locator(".loom-thread-static").inner_text()
        if other is not None:
            other.close()


def test_the_shipped_config_enables_the_extension():
    config = json.loads((REPO / "jupyter-config/jupyter_server_config.d/loom_nb.json").read_text())
    assert config == {"ServerApp": {"jpserver_extensions": {"loom_nb.http": True}}}
    from loom_nb.http import _jupyter_server_extension_points

    [point] = _jupyter_server_extension_points()
    module = __import__(point["module"], fromlist=["_load_jupyter_server_extension"])
    assert callable(module._load_jupyter_server_extension)


@pytest.mark.postgres
def test_on_the_postgresql_store_each_user_reads_their_own(
    loom_database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """What a hub does: LOOM_STORE names one PostgreSQL database for every user's server."""
    from loom_nb._store import store_from_env

    url = loom_database.dsn(loom_database.owner)  # opens (and creates) the schema loom
    monkeypatch.setenv("LOOM_STORE", url)
    _, team = agents.make(store_from_env(), str(tmp_path / "writes.txt"))
    alices = team.run_sync("alice's apple", context={"user": "alice"}).thread_id
    bobs = team.run_sync("bob's apple", context={"user": "bob"}).thread_id
    server = Server(tmp_path, "jupyter_server", store=url)
    try:
        for who, mine, theirs in ((ALICE, alices, bobs), (BOB, bobs, alices)):
            found = server.get("loom/api/agents/team/threads", who, q="apple").json()
            assert [t["id"] for t in found["threads"]] == [mine]
            assert server.get("loom/api/agents/team", who, threadId=mine).status_code == 200
            assert server.get("loom/api/agents/team", who, threadId=theirs).status_code == 404
        page = httpx.get(server.url + "loom/threads", headers={"Authorization": ALICE})
        assert page.status_code == 200 and "alice&#x27;s apple" in page.text
        assert "bob&#x27;s apple" not in page.text
    finally:
        server.stop()
        loom_database.drop_schema("loom")
