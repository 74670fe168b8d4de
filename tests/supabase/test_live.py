"""The connector against a real Supabase project. Opt-in, read-only; skipped unless set:

    SUPABASE_URL=https://<project>.supabase.co
    SUPABASE_ANON_KEY=<anon or publishable key>
    SUPABASE_TEST_TABLE=<a table that key may read>
    SUPABASE_TEST_COLUMNS=id,name          (optional: the allowlisted columns)
    SUPABASE_ACCESS_TOKEN=<a user's JWT>   (optional: read as that user, RLS applies)

Nothing is written: the tests only select.
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any

import pytest
from supabase import ClientOptions, acreate_client, create_client

from loom_nb import define_agent
from loom_nb.models.testing import ReplayModel, Reply

pytestmark = pytest.mark.live

URL = os.environ.get("SUPABASE_URL", "")
KEY = os.environ.get("SUPABASE_ANON_KEY", "")
TABLE = os.environ.get("SUPABASE_TEST_TABLE", "")
COLUMNS = [c.strip() for c in os.environ.get("SUPABASE_TEST_COLUMNS", "").split(",") if c.strip()]
TOKEN = os.environ.get("SUPABASE_ACCESS_TOKEN", "")


@pytest.fixture(autouse=True)
def _live(monkeypatch: pytest.MonkeyPatch) -> None:
    if not (URL and KEY and TABLE):
        pytest.skip("live Supabase tests: set SUPABASE_URL, SUPABASE_ANON_KEY, SUPABASE_TEST_TABLE")
    # Undo the suite's loopback-only guard (tests/conftest.py) for this opt-in test only.
    real = getattr(socket.socket.connect, "__globals__", {}).get("_real_connect")
    if real is not None:
        monkeypatch.setattr(socket.socket, "connect", real)


def options() -> ClientOptions:
    return ClientOptions(headers={"Authorization": f"Bearer {TOKEN}"} if TOKEN else {})


def agent_with(factory: Any, replies: list[Reply | str]) -> Any:
    from loom_nb.supabase import supabase_tools

    table: dict[str, Any] = {"description": "live test table"}
    if COLUMNS:
        table["columns"] = COLUMNS
    connector = supabase_tools(client=factory, tables={TABLE: table}, max_rows=3)
    return define_agent(name="live", model=ReplayModel(replies), connectors=[connector])


def tool_results(result: Any) -> list[Any]:
    return [r for m in result.new_messages for r in m.tool_results]


def test_live_select_is_bounded_and_allowlisted() -> None:
    agent = agent_with(
        lambda ctx: create_client(URL, KEY, options=options()),
        [
            Reply(tool_calls=[("supabase_select", {"table": TABLE, "count": True})]),
            Reply(tool_calls=[("supabase_select", {"table": "secrets_not_listed"})]),
            Reply(
                tool_calls=[("supabase_select", {"table": TABLE, "columns": ["x,profiles(email)"]})]
            ),
            "done",
        ],
    )
    result = agent.run_sync("Look at the table")
    assert result.status == "complete"
    read, unlisted, embed = tool_results(result)
    assert not read.is_error, read.content
    assert len(read.data) <= 3
    if COLUMNS:
        assert set(read.data.columns) <= set(COLUMNS)
    assert "total_rows=" in read.content
    for refused in (unlisted, embed):
        assert refused.is_error and "error" in json.loads(refused.content)


def test_live_async_client() -> None:
    async def factory(ctx: Any) -> Any:
        return await acreate_client(URL, KEY, options=options())

    agent = agent_with(
        factory, [Reply(tool_calls=[("supabase_select", {"table": TABLE, "limit": 1})]), "done"]
    )
    result = agent.run_sync("One row")
    (read,) = tool_results(result)
    assert not read.is_error, read.content
    assert len(read.data) <= 1
