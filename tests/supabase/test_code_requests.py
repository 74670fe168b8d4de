"""The supabase-py code of a Supabase call sends the very requests its tool sent: the same
method, path, query string, ``Prefer`` and body, byte for byte, through a real client to a
recording stand-in. So the code shows what PostgREST ran, translations included (``in [""]``
as ``eq ''``, integral numbers in integer form, no offset with ``limit=0``), and an approved
update reads as the count its card showed, then the PATCH held to it with ``max_affected``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest
from supabase import create_client

from loom_nb import RunContext
from loom_nb._code import CodeContext
from loom_nb._tools import Connector, Tool, ToolInputError
from loom_nb.supabase import supabase_tools
from tests.supabase._capture import CaptureServer, Reply, Request, rows_reply
from tests.supabase.test_card_effect import KEY, OPERATORS, ROW, VALUES, a_filter

TABLES: dict[str, Any] = {
    "tickets": {"columns": ["id", "title", "state"], "write": True},
    "notes": {"write": True},
}


@pytest.fixture(scope="module")
def server() -> Iterator[CaptureServer]:
    def answer(req: Request) -> Reply:
        if req.method in ("PATCH", "POST"):
            return Reply(201 if req.method == "POST" else 200, [ROW])
        return rows_reply([ROW], total=1)

    with CaptureServer() as s:
        s.responder = answer
        yield s


def connector(server: CaptureServer, *, approve_writes: bool = True) -> Connector:
    client = create_client(server.url, KEY)

    def user_client(ctx: RunContext) -> Any:
        return client

    return supabase_tools(
        client=user_client, tables=TABLES, aggregates=True, approve_writes=approve_writes
    )


def sent(server: CaptureServer) -> list[tuple[str, str, str, str | None, Any]]:
    return [(r.method, r.path, r.query, r.headers.get("prefer"), r.json) for r in server.requests]


async def by_the_tool(tool: Tool, args: dict[str, Any], ctx: RunContext) -> None:
    """As the run calls it: the card first when the call waits for approval, then the call
    with the card it was approved on."""
    if tool.requires_approval(args):
        ctx.approved_preview = await tool.make_preview(args, ctx)
    out = await tool.call(args, ctx)
    assert not out.is_error, out.content


def by_the_code(tool: Tool, args: dict[str, Any], conn: Connector, server: CaptureServer) -> str:
    """The call's code (a write's too, which an export leaves commented) run as it is."""
    ctx = CodeContext("result_1", agent="analyst", thread_id="t1")
    assert tool.code is not None
    code = tool.code(args, ctx)
    assert code is not None
    client = create_client(server.url, KEY)
    namespace: dict[str, Any] = {"user_client": lambda ctx: client, "context": {}}
    exec("\n\n".join([*ctx.setups, code]), namespace)
    return code


async def same_requests(conn: Connector, server: CaptureServer, name: str, args: Any) -> str | None:
    """The code of the call, after checking it sends what the tool sent; None when the tool
    refused the call before any request (``tests/supabase/test_card_effect.py``)."""
    tool = conn.tools[name]
    server.clear()
    try:
        tool.validate(args)
        await by_the_tool(tool, args, RunContext("analyst", "t1"))
    except ToolInputError:
        assert server.requests == []
        return None
    expected = sent(server)
    server.clear()
    code = by_the_code(tool, args, conn, server)
    assert sent(server) == expected, code
    return code


@pytest.mark.parametrize("value", list(VALUES.values()), ids=list(VALUES))
async def test_a_reads_code_sends_the_tools_requests_for_every_value(server, value):
    conn = connector(server)
    for op in OPERATORS:
        for negate in (False, True):
            f = a_filter(op, value, negate)
            args = {"table": "tickets", "filters": [f], "count": negate}
            if await same_requests(conn, server, "supabase_select", args) is None:
                continue
            aggregate = {
                "table": "tickets",
                "group_by": ["state"],
                "aggregates": [{"fn": "count"}, {"fn": "max", "column": "id"}],
                "filters": [f],
            }
            await same_requests(conn, server, "supabase_aggregate", aggregate)


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("supabase_select", {"table": "tickets", "limit": 0, "offset": 3}),
        ("supabase_select", {"table": "notes", "order": [{"column": "id", "desc": True}]}),
        ("supabase_aggregate", {"table": "tickets", "limit": 0, "offset": 2}),
        (
            "supabase_insert",
            {"table": "tickets", "rows": [{"id": 3.0, "title": "x"}, {"id": 1e16, "title": "y"}]},
        ),
        (
            "supabase_update",
            {
                "table": "tickets",
                "values": {"state": "closed", "id": 2.0},
                "filters": [{"column": "title", "op": "in", "value": ["", ""]}],
            },
        ),
        (
            "supabase_update",
            {
                "table": "notes",
                "values": {"body": "x"},
                "filters": [{"column": "id", "op": "gte", "value": 1.0}],
            },
        ),
    ],
)
@pytest.mark.parametrize("approve_writes", [True, False])
async def test_the_code_sends_the_tools_requests(server, name, args, approve_writes):
    conn = connector(server, approve_writes=approve_writes)
    assert await same_requests(conn, server, name, args) is not None


async def test_an_approved_updates_code_counts_then_patches_at_most_that_many(server):
    args = {
        "table": "tickets",
        "values": {"state": "closed"},
        "filters": [{"column": "state", "op": "eq", "value": "open"}],
    }
    code = await same_requests(connector(server), server, "supabase_update", args)
    assert code == (
        "matching = (\n"
        "    user_client(ctx)\n"
        '    .table("tickets")\n'
        '    .select("id", "title", "state", count="exact")\n'
        '    .eq("state", "open")\n'
        "    .limit(5)\n"
        "    .execute()\n"
        ")\n"
        "response = (\n"
        "    user_client(ctx)\n"
        '    .table("tickets")\n'
        '    .update({"state": "closed"}, returning="representation")\n'
        '    .eq("state", "open")\n'
        '    .select("id", "title", "state")\n'
        "    .max_affected(matching.count)\n"
        "    .execute()\n"
        ")"
    )
    assert [(r.method, r.headers.get("prefer")) for r in server.requests] == [
        ("GET", "count=exact"),
        ("PATCH", "return=representation,handling=strict,max-affected=1"),
    ]


async def test_the_code_leaves_the_notebooks_variables_of_its_own_names_alone(server):
    """A thread that also reads DataFrames called ``response``, ``matching``, ``ctx`` or
    ``postgrest_frame``: the Supabase code names its own variables otherwise."""
    conn = connector(server)
    client = create_client(server.url, KEY)
    theirs = {name: object() for name in ("response", "matching", "ctx", "postgrest_frame")}
    update = {
        "table": "tickets",
        "values": {"state": "closed"},
        "filters": [{"column": "state", "op": "eq", "value": "open"}],
    }
    for name, args in [("supabase_select", {"table": "tickets"}), ("supabase_update", update)]:
        tool = conn.tools[name]
        server.clear()
        await by_the_tool(tool, args, RunContext("analyst", "t1"))
        expected = sent(server)
        server.clear()
        ctx = CodeContext("result_1", agent="analyst", thread_id="t1", taken=frozenset(theirs))
        assert tool.code is not None
        code = tool.code(args, ctx)
        assert code is not None
        namespace = {"user_client": lambda ctx: client, "context": {}, **theirs}
        exec("\n\n".join([*ctx.setups, code]), namespace)
        assert sent(server) == expected, code
        assert all(namespace[n] is v for n, v in theirs.items()), code


async def test_a_joins_code_sends_the_embed_and_gives_the_tools_frame(server):
    """The code of a select that joins along a declared relationship sends the same embed,
    filter and order, and flattens the embeds into the same DataFrame, a missing one too."""
    client = create_client(server.url, KEY)
    conn = supabase_tools(
        client=lambda ctx: client,
        tables={"tickets": {"columns": ["id", "owner"]}, "people": {"columns": ["id", "name"]}},
        relationships={"tickets.owner": "people.id"},
    )
    rows = [
        {"id": 1, "owner": 7, "people": {"name": "Ada"}},
        {"id": 2, "owner": None, "people": None},
    ]
    answer, server.responder = server.responder, lambda req: rows_reply(rows)
    args = {
        "table": "tickets",
        "join": ["people"],
        "columns": ["id", "people.name"],
        "order": [{"column": "people.name", "desc": True}],
    }
    try:
        tool = conn.tools["supabase_select"]
        server.clear()
        out = await tool.call(args, RunContext("analyst", "t1"))
        expected = sent(server)
        assert "select=id%2Cpeople%21owner%28name%29" in expected[0][2]
        assert "order=people%28name%29.desc" in expected[0][2]
        assert out.data["people.name"].iloc[0] == "Ada" and out.data["people.name"].isna().iloc[1]
        assert "1 of these tickets rows had no people row" in (out.content or "")
        server.clear()
        ctx = CodeContext("result_1", agent="analyst", thread_id="t1")
        code = tool.code(args, ctx)
        assert code is not None
        namespace: dict[str, Any] = {"supabase_client": lambda ctx: client, "context": {}}
        exec("\n\n".join([*ctx.setups, code]), namespace)
        assert sent(server) == expected, code
        pd.testing.assert_frame_equal(namespace["result_1"], out.data)
    finally:
        server.responder = answer
