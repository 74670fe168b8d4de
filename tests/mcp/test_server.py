"""loom_nb as an MCP server, driven by the SDK's own client over stdio and HTTP on loopback.

The server, the processes that decide and the test share one SQLite file; the write tool
counts its runs in a ledger file, so "exactly once" is counted across processes.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from loom_nb.sqlite import sqlite_store
from tests.mcp._processes import (
    ROOT,
    decide,
    environment,
    free_port,
    http_session,
    start_http,
    stdio_session,
)

pytestmark = pytest.mark.slow


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    values = environment(tmp_path / "loom.db", tmp_path / "ledger.txt")
    for key, value in values.items():
        if key.startswith("LOOM_"):
            monkeypatch.setenv(key, value)
    return values


def ledger(env: dict[str, str]) -> list[str]:
    path = Path(env["LOOM_TEST_LEDGER"])
    return path.read_text(encoding="utf-8").split("\n")[:-1] if path.exists() else []


def text(result: Any) -> str:
    return "\n".join(c.text for c in result.content)


def unmarked(content: str) -> str:
    """A result's text with its random data marker replaced, to compare two results."""
    return re.sub(r"data-[0-9a-f]{16}", "data-M", content)


def served() -> Any:
    """The served module as a notebook imports it, on this test's store."""
    from tests.mcp import _served

    return importlib.reload(_served)


async def test_stdio_lists_the_connectors_tools_with_their_schemas_and_reads_as_the_agent(env):
    server = served().server
    async with stdio_session(env) as session:
        listed = {t.name: t for t in (await session.list_tools()).tools}
        assert set(listed) == {*server.agent.tools, "loom_call_status"}
        assert "ask_user" not in listed  # a question is for the client's model to ask
        for name, tool in server.agent.tools.items():
            assert listed[name].input_schema == tool.parameters
            assert listed[name].description == tool.description
        assert listed["frames_select"].annotations.read_only_hint is True
        assert listed["record"].annotations.read_only_hint is False

        args = {"table": "orders", "filters": [{"column": "total", "op": "gt", "value": 50}]}
        result = await session.call_tool("frames_select", args)
    assert not result.is_error
    direct = await server.agent.tools["frames_select"].call(args, _ctx())
    assert unmarked(text(result)) == unmarked(direct.content)
    rows = result.structured_content["rows"]
    assert [r["id"] for r in rows] == [int(i) for i in direct.data["id"].head(3)]  # its page
    assert len(rows) == 3  # the connector's max_rows holds over MCP too
    # the session's thread holds the call, as a notebook run's would
    store = sqlite_store(env["LOOM_TEST_DB"])
    [info] = store.list(agent="mcp-test")
    thread = store.load(info.id)
    [call] = [c for m in thread.messages for c in m.tool_calls]
    assert call.name == "frames_select" and call.arguments == args


def _ctx() -> Any:
    from loom_nb import RunContext

    return RunContext("mcp-test", "direct")


async def test_a_write_waits_runs_once_when_decided_in_another_process(env):
    async with stdio_session(env) as session:
        pending = await session.call_tool("record", {"entry": "<img src=x onerror=alert(1)>"})
        assert not pending.is_error
        status = pending.structured_content
        assert status["status"] == "pending" and "%loom approvals" in text(pending)
        assert ledger(env) == []  # nothing ran
        # the card is in the store, bound to the exact arguments
        store = sqlite_store(env["LOOM_TEST_DB"])
        [card] = store.load(status["thread_id"]).pending
        assert card.call_id == status["call_id"] and card.digest == status["digest"]
        assert card.arguments == {"entry": "<img src=x onerror=alert(1)>"}

        again = await session.call_tool("loom_call_status", _ids(status))
        assert again.structured_content["status"] == "pending" and ledger(env) == []
        # a read in the same session goes on while the write waits (in a new thread)
        read = await session.call_tool("frames_list_tables", {})
        assert not read.is_error

        decider = decide(env, status["thread_id"], status["call_id"])
        out, err = decider.communicate(timeout=120)
        assert decider.returncode == 0, err
        assert "decided complete" in out
        assert ledger(env) == ["<img src=x onerror=alert(1)>"]

        outcome = await session.call_tool("loom_call_status", _ids(status))
        assert not outcome.is_error and "recorded" in text(outcome)
        outcome = await session.call_tool("loom_call_status", _ids(status))
        assert "recorded" in text(outcome)
    assert ledger(env) == ["<img src=x onerror=alert(1)>"]  # once


def _ids(status: dict[str, Any]) -> dict[str, str]:
    return {"thread_id": status["thread_id"], "call_id": status["call_id"]}


async def test_two_deciders_one_execution(env):
    async with stdio_session(env) as session:
        status = (await session.call_tool("record", {"entry": "once"})).structured_content
        deciders = [decide(env, status["thread_id"], status["call_id"]) for _ in range(2)]
        outs = [d.communicate(timeout=120) for d in deciders]
        assert all(d.returncode == 0 for d in deciders), outs
        said = sorted(out.strip() for out, _ in outs)
        assert said == ["already decided", "decided complete"]
        assert ledger(env) == ["once"]
        outcome = await session.call_tool("loom_call_status", _ids(status))
        assert "recorded 'once'" in text(outcome)


async def test_a_rejected_write_never_runs_and_the_client_reads_the_rejection(env):
    async with stdio_session(env) as session:
        status = (await session.call_tool("record", {"entry": "no"})).structured_content
        decider = decide(env, status["thread_id"], status["call_id"], approve=False)
        assert decider.communicate(timeout=120)[0].strip() == "decided complete"
        outcome = await session.call_tool("loom_call_status", _ids(status))
    assert outcome.is_error and "rejected" in text(outcome)
    assert ledger(env) == []


async def test_http_on_loopback_and_a_killed_server_loses_no_decided_call(env):
    port = free_port()
    process = start_http(env, port)
    try:
        async with http_session(port) as session:
            listed = {t.name for t in (await session.list_tools()).tools}
            assert "frames_select" in listed and "loom_call_status" in listed
            read = await session.call_tool("frames_select", {"table": "orders", "limit": 2})
            assert len(read.structured_content["rows"]) == 2
            pending = await session.call_tool("record", {"entry": "after the kill"})
            status = pending.structured_content
            assert status["status"] == "pending"
    finally:
        process.kill()  # SIGKILL: no goodbye
        process.wait(30)
    # decided while no server runs: by compare-and-set in the store, as the HTTP API decides
    store = sqlite_store(env["LOOM_TEST_DB"])
    store.update_calls(status["thread_id"], [status["call_id"]], "approved", expect={"pending"})
    assert ledger(env) == []

    process = start_http(env, port := free_port())
    try:
        async with http_session(port) as session:
            outcome = await session.call_tool("loom_call_status", _ids(status))
            assert not outcome.is_error and "recorded" in text(outcome)
            await session.call_tool("loom_call_status", _ids(status))
    finally:
        process.kill()
        process.wait(30)
    assert ledger(env) == ["after the kill"]


async def test_the_thread_of_a_session_reads_in_the_notebook_as_any_thread(env):
    """The session's thread, loaded by the served agent (as ``%loom threads`` does)."""
    async with stdio_session(env) as session:
        await session.call_tool("frames_select", {"table": "orders", "limit": 1})
    agent = served().server.agent
    [info] = agent.threads()
    assert info.title == "MCP session: MCP client mcp"  # the SDK client's default name
    thread = agent.thread(info.id)
    [frame] = thread.frames
    assert isinstance(frame, pd.DataFrame) and list(frame["id"]) == [1]


def _threads_and_calls(env: dict[str, str]) -> list[list[str]]:
    store = sqlite_store(env["LOOM_TEST_DB"])
    threads = [store.load(info.id) for info in store.list(agent="mcp-test")]
    threads.sort(key=lambda t: t.created_at)
    return [[c.name for m in t.messages for c in m.tool_calls] for t in threads]


async def test_one_session_is_one_thread_until_a_call_waits(env):
    async with stdio_session(env) as session:
        await session.call_tool("frames_list_tables", {})
        await session.call_tool("frames_select", {"table": "orders", "limit": 1})
        assert _threads_and_calls(env) == [["frames_list_tables", "frames_select"]]
        pending = await session.call_tool("record", {"entry": "x"})
        assert pending.structured_content["status"] == "pending"
        await session.call_tool("frames_select", {"table": "orders", "limit": 1})
    # the waiting call keeps its thread; the session goes on in a new one
    assert _threads_and_calls(env) == [
        ["frames_list_tables", "frames_select", "record"],
        ["frames_select"],
    ]
    async with stdio_session(env) as session:  # another session: another thread
        await session.call_tool("frames_list_tables", {})
    assert len(_threads_and_calls(env)) == 3


async def test_one_http_session_is_one_thread(env):
    port = free_port()
    process = start_http(env, port)
    try:
        async with http_session(port) as session:
            for _ in range(3):
                await session.call_tool("frames_select", {"table": "orders", "limit": 1})
        async with http_session(port) as session:
            await session.call_tool("frames_list_tables", {})
    finally:
        process.kill()
        process.wait(30)
    assert _threads_and_calls(env) == [["frames_select"] * 3, ["frames_list_tables"]]


async def test_a_clients_hostile_name_is_one_short_line_of_text(env):
    hostile = "<img src=x onerror=alert(1)>\u2028# %%\n$\\foo$" + "x" * 200
    async with stdio_session(env, client_name=hostile) as session:
        await session.call_tool("frames_list_tables", {})
    agent = served().server.agent
    [info] = agent.threads()
    said = info.title.removeprefix("MCP session: MCP client ")
    assert said == "<img src=x onerror=alert(1)> # %% $\\foo$" + "x" * 20
    assert len(info.title.splitlines()) == 1


async def test_the_cli_refuses_what_it_cannot_serve(env, tmp_path):
    for target, message in [
        ("tests.mcp._served", "MODULE:OBJECT"),
        ("tests.mcp._served:nope", "has no 'nope'"),
        ("tests.mcp._served:MAX_ROWS", "is int"),
    ]:
        done = subprocess.run(
            [sys.executable, "-m", "loom_nb.mcp", target],
            env={**os.environ, **env},
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2 and message in done.stderr, done.stderr


def asker(action: str, approve: bool | None = None) -> tuple[list[str], Any]:
    """An elicitation callback standing in for the client's user; it keeps what it was shown."""
    from mcp import types

    shown: list[str] = []

    async def answer(context: Any, params: Any) -> Any:
        shown.append(params.message)
        content = {"approve": approve} if approve is not None else None
        return types.ElicitResult(action=action, content=content)

    return shown, answer


@pytest.mark.parametrize(
    ("action", "approve", "runs"),
    [("accept", True, True), ("accept", False, False), ("decline", None, False)],
)
async def test_elicit_asks_the_clients_user_with_the_cards_text(env, action, approve, runs):
    env = {**env, "LOOM_TEST_ELICIT": "1"}
    shown, answer = asker(action, approve)
    async with stdio_session(env, answer) as session:
        result = await session.call_tool("record", {"entry": "asked \u2028 $\\x$"})
    [message] = shown
    assert message.startswith("Approve record? It runs with exactly these arguments:")
    assert '"entry": "asked \u2028 $\\\\x$"' in message
    if runs:
        assert not result.is_error and "recorded" in text(result)
        assert ledger(env) == ["asked \u2028 $\\x$"]
    elif approve is False:
        assert result.is_error and "rejected" in text(result) and ledger(env) == []
    else:  # declined: the card waits for the notebook
        assert result.structured_content["status"] == "pending" and ledger(env) == []


async def test_without_elicit_the_client_is_never_asked(env):
    shown, answer = asker("accept", True)
    async with stdio_session(env, answer) as session:
        result = await session.call_tool("record", {"entry": "not asked"})
    assert shown == [] and result.structured_content["status"] == "pending"
    assert ledger(env) == []


async def test_a_clients_write_is_approved_with_loom_approvals_in_a_kernel(env, tmp_path):
    """The notebook's way: the served module imported in a real kernel, its agent in a
    variable, ``%loom approvals`` showing the MCP client's card, Approve clicked."""
    from tests.notebook.nb_kernels import build, execute, text_of

    async with stdio_session(env) as session:
        status = (
            await session.call_tool("record", {"entry": "from the kernel"})
        ).structured_content
        cells = [
            f"import os, sys\nsys.path.insert(0, {str(ROOT)!r})\nos.environ.update({env!r})",
            "%load_ext loom_nb\nfrom tests.mcp._served import server\norders_mcp = server.agent",
            "%loom approvals",
            "from loom_nb.notebook import session\n"
            "card = session().last_view.cards[0]\n"
            "print(card.pending.tool, card.pending.arguments)\n"
            "card.approve_button.click()\n"
            "print(card.wait(60).status)",
        ]
        nb = execute(cells, build("7.4"), tmp_path, timeout=120)
        assert text_of(nb.cells[3]).splitlines() == [
            "record {'entry': 'from the kernel'}",
            "complete",
        ]
        assert ledger(env) == ["from the kernel"]
        outcome = await session.call_tool("loom_call_status", _ids(status))
        assert "recorded 'from the kernel'" in text(outcome)
