"""``python -m loom_nb.http MODULE``: a real process serving the agents a module defines."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from loom_nb.sqlite import sqlite_store
from tests.http import agents
from tests.postgres_server import free_port

pytestmark = pytest.mark.slow

REPO = Path(__file__).parents[2]


def test_python_m_loom_nb_http_serves_a_modules_agents(tmp_path: Path):
    path = tmp_path / "loom.db"
    store = sqlite_store(path)
    notes, _ = agents.make(store, str(tmp_path / "writes.txt"))
    thread_id = notes.run_sync("hello").thread_id
    port = free_port()
    env = {**os.environ, "LOOM_STORE": str(path), "PYTHONPATH": str(REPO)}
    server = subprocess.Popen(
        [sys.executable, "-m", "loom_nb.http", "tests.http.served", "--port", str(port)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        url = f"http://127.0.0.1:{port}/api/agents/notes"
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, server.stdout.read() if server.stdout else ""
            try:
                answer = httpx.get(url, params={"threadId": thread_id}, timeout=10)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        assert answer.status_code == 200, answer.text
        assert [m["parts"][0]["text"] for m in answer.json()["messages"]] == [
            "hello",
            "You said: hello",
        ]
        listed = httpx.get(url.replace("notes", "team") + "/threads", timeout=10)
        assert listed.status_code == 401  # team has auth, and this request names no user
    finally:
        server.terminate()
        server.wait(20)
        store.close()


def test_a_module_without_agents_is_refused_with_a_message():
    done = subprocess.run(
        [sys.executable, "-m", "loom_nb.http", "json"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "'json' defines no agent" in done.stderr
