"""The table connectors' hostile-argument properties, through the MCP server's call path.

The calls go to ``server.call_tool`` in this process (what the SDK calls for each
``tools/call``; the transports are tested in ``test_server``): nothing outside the grammar
leaves, reads stay bounded, and nothing is written before a decision.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pandas.testing import assert_frame_equal

from loom_nb import memory_store
from loom_nb.frames import frame_tools
from loom_nb.mcp import mcp_server
from tests.frames._orders import orders_frame
from tests.frames.test_frames_properties import MAX, aggregate_args, select_args, write_args

pytestmark = pytest.mark.slow  # hundreds of generated calls, each one run of the agent loop


def wire(args: Any) -> Any:
    """``args`` as a client sends them: JSON (object keys are strings)."""
    return json.loads(json.dumps(args, default=str))


def call(server: Any, name: str, args: Any) -> Any:
    return asyncio.run(server.call_tool(name, wire(args)))


def text(result: Any) -> str:
    return "\n".join(c.text for c in result.content)


def assert_bounded(result: Any) -> None:
    if result.is_error:
        assert json.loads(text(result))["error"]  # the client is told why
        return
    shown = re.search(r" rows=(\d+) ", text(result))
    assert shown is not None and int(shown.group(1)) <= MAX
    assert len(result.structured_content["rows"]) <= MAX


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(select_args, aggregate_args)
def test_frames_reads_over_mcp_never_fail_the_server_and_stay_bounded(select, aggregate):
    server = mcp_server(
        connectors=[frame_tools({"orders": orders_frame()}, max_rows=MAX)], store=memory_store()
    )
    assert_bounded(call(server, "frames_select", select))
    assert_bounded(call(server, "frames_aggregate", aggregate))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(write_args, min_size=1, max_size=3))
def test_frames_writes_over_mcp_change_nothing_before_a_decision(writes):
    frame = orders_frame()
    server = mcp_server(
        connectors=[frame_tools({"orders": {"frame": frame, "write": True}}, max_rows=MAX)],
        store=memory_store(),
    )
    for name, args in writes:
        result = call(server, name, args)
        if not result.is_error:
            assert result.structured_content["status"] == "pending", text(result)
            [card] = server.agent.thread(result.structured_content["thread_id"]).pending
            assert card.arguments == wire(args)  # bound to exactly what the client sent
        assert_frame_equal(frame, orders_frame())


def test_supabase_requests_over_mcp_stay_inside_the_allowlist_and_never_write():
    from supabase import create_client

    from loom_nb._tables.options import IDENTIFIER, RESERVED
    from loom_nb.supabase import supabase_tools
    from tests.supabase._capture import CaptureServer
    from tests.supabase.test_connector_properties import ALLOWED, MAX_ROWS, TABLES, calls

    def allowed(table: str, column: str) -> bool:
        columns = ALLOWED[table]
        if columns is not None:
            return column in columns
        return bool(IDENTIFIER.match(column)) and column.lower() not in RESERVED

    with CaptureServer() as capture:
        client = create_client(capture.url, "anon-key")
        conn = supabase_tools(client=lambda ctx: client, tables=TABLES, max_rows=MAX_ROWS)
        seen = {"pending": 0, "read": 0, "refused": 0}

        @settings(
            max_examples=150,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow],
        )
        @given(calls)
        # one of each side for certain; the generated ones add the rest
        @example(
            ("supabase_insert", {"table": "tickets", "rows": [{"title": "t", "state": "open"}]})
        )
        @example(("supabase_select", {"table": "orders"}))
        @example(("supabase_select", {"table": "secrets"}))
        def run(made: tuple[str, dict[str, Any]]) -> None:
            tool, args = made
            capture.clear()
            server = mcp_server(connectors=[conn], store=memory_store())
            result = call(server, tool, args)
            for req in capture.requests:  # selects, and the previews of updates: reads only
                assert req.method == "GET", (req.method, req.path, req.query)
                table = req.path.removeprefix("/rest/v1/")
                assert table in TABLES, req.path
                for key, value in req.params:
                    if key == "select":
                        names = value.split(",")
                        assert (names == ["*"] and ALLOWED[table] is None) or all(
                            allowed(table, c) for c in names
                        ), value
                    elif key == "order":
                        assert all(allowed(table, t.rpartition(".")[0]) for t in value.split(","))
                    elif key not in ("limit", "offset"):
                        assert allowed(table, key), (key, req.query)  # a filter
            if result.is_error:
                seen["refused"] += 1
            elif tool == "supabase_select":
                seen["read"] += 1
            else:
                assert result.structured_content["status"] == "pending", text(result)
                seen["pending"] += 1

        run()
    # every side is reached: the examples above for certain, the generated calls as they fall
    assert min(seen.values()) > 0, seen
