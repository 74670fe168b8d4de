"""Property: whatever the model sends, every request that leaves names only allowlisted tables
and columns, carries a limit no greater than max_rows, and no update leaves without a filter."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from supabase import create_client

from loom_nb import RunContext
from loom_nb._tables.options import IDENTIFIER, RESERVED
from loom_nb._tools import Connector, ToolInputError
from loom_nb.supabase import supabase_tools
from loom_nb.supabase._connector import PAGE_ROWS
from tests.supabase._capture import CaptureServer, Request

MAX_ROWS = 7
TABLES: dict[str, Any] = {
    "orders": {"columns": ["id", "status", "total", "created_at"]},
    "products": {"columns": ["id", "name", "price"]},
    "tickets": {"columns": ["id", "title", "state"], "write": True},
    "notes": {"write": True},  # every column allowed: names must still be plain identifiers
}
ALLOWED = {t: set(o["columns"]) if "columns" in o else None for t, o in TABLES.items()}
WRITABLE = {t for t, o in TABLES.items() if o.get("write")}
FILTER_VALUE = re.compile(r"^(not\.)?(eq|neq|gt|gte|lt|lte|like|ilike|in)\.", re.S)

HOSTILE = [
    "*",
    "id,secret",
    "owner:profiles(email)",
    "secrets!inner(*)",
    "...profiles(email)",
    "pw:password_hash",
    "meta->>token",
    "id::text",
    "count()",
    '"quoted"',
    "id.desc,meta->>k",
    "secrets.value",
    "limit",
    "select",
    "order",
    "offset",
    "columns",
    "on_conflict",
    "or",
    "and",
    "../auth/v1/admin/users",
    "rpc/fn",
    "5&select=*",
    "(id.eq.1)",
    "not.is.anything",
    "null",
    "id);drop table x;--",
    "a\nb",
    "%",
    "",
    " ",
    "ORDER",
    "Limit",
]
KNOWN = st.sampled_from(sorted({c for o in TABLES.values() for c in o.get("columns", [])}))
# Mostly names the model might plausibly send, so that many calls pass and their requests
# are checked; the rest is hostile or random.
names = st.one_of(
    KNOWN,
    KNOWN,
    KNOWN,
    KNOWN,
    KNOWN,
    KNOWN,
    st.sampled_from(HOSTILE),
    st.from_regex(IDENTIFIER, fullmatch=True),
    st.text(max_size=12),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=True),
    st.sampled_from(HOSTILE),
    st.text(max_size=15),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=3),
    max_leaves=6,
)
VALID_OPS = ["eq", "neq", "gt", "gte", "lt", "lte", "like", "ilike", "in", "is_null"]
ops = st.one_of(
    st.sampled_from(VALID_OPS),
    st.sampled_from(VALID_OPS),
    st.sampled_from(VALID_OPS),
    st.sampled_from(["or", "match", "fts", "cs", "is", "not.eq", "filter", "and"]),
)
plain_values = st.one_of(
    scalars.filter(lambda v: v is not None),
    st.lists(scalars.filter(lambda v: v is not None), min_size=1, max_size=4),
)
flags = st.one_of(st.booleans(), st.booleans(), st.booleans(), scalars)
one_filter = st.one_of(
    st.fixed_dictionaries(
        {"column": names, "op": ops}, optional={"value": plain_values, "not": flags}
    ),
    st.fixed_dictionaries({"column": names, "op": st.just("is_null")}, optional={"not": flags}),
    st.fixed_dictionaries(
        {"column": names, "op": ops}, optional={"value": json_values, "not": flags, "raw": scalars}
    ),
)
filters = st.lists(one_filter, max_size=4)
TABLE = st.sampled_from(sorted(TABLES))
tables = st.one_of(TABLE, TABLE, TABLE, TABLE, st.sampled_from(HOSTILE), st.text(max_size=8))
ints = st.one_of(
    st.integers(0, 10_000),
    st.integers(0, 10_000),
    st.integers(-5, 10_000),
    st.sampled_from(["5", "5&select=*", 2.5, None, True]),
)

select_args = st.fixed_dictionaries(
    {"table": tables},
    optional={
        "columns": st.lists(names, max_size=4),
        "filters": filters,
        "order": st.lists(
            st.fixed_dictionaries({"column": names}, optional={"desc": flags}), max_size=3
        ),
        "limit": ints,
        "offset": ints,
        "count": flags,
    },
)
rows = st.dictionaries(names, json_values, min_size=1, max_size=4)
insert_args = st.one_of(
    st.fixed_dictionaries({"table": tables, "rows": st.lists(rows, min_size=1, max_size=3)}),
    st.fixed_dictionaries({"table": tables}, optional={"rows": scalars, "on_conflict": scalars}),
)
update_args = st.one_of(
    st.fixed_dictionaries({"table": tables, "values": rows, "filters": filters}),
    st.fixed_dictionaries({"table": tables}, optional={"values": scalars, "filters": scalars}),
)


@st.composite
def near_valid(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """A call shaped like a real model's, for one table, with hostile pieces mixed in."""
    tool = draw(st.sampled_from(["supabase_select", "supabase_insert", "supabase_update"]))
    table = draw(TABLE if tool == "supabase_select" else st.sampled_from(sorted(WRITABLE)))
    own = TABLES[table].get("columns") or ["id", "body", "owner_id"]

    def rarely() -> bool:
        return draw(st.sampled_from([False] * 11 + [True]))

    def column() -> str:
        return draw(names) if rarely() else draw(st.sampled_from(own))

    def value() -> Any:
        return draw(json_values) if rarely() else draw(scalars.filter(lambda v: v is not None))

    def flag() -> Any:
        return draw(scalars) if rarely() else draw(st.booleans())

    def a_filter() -> dict[str, Any]:
        op = draw(ops) if rarely() else draw(st.sampled_from(VALID_OPS))
        f: dict[str, Any] = {"column": column(), "op": op}
        if op == "in":
            f["value"] = [value() for _ in range(draw(st.integers(1, 4)))]
        elif op != "is_null" or rarely():
            f["value"] = value()
        if draw(st.booleans()):
            f["not"] = flag()
        return f

    n_filters = draw(st.integers(1 if tool == "supabase_update" else 0, 3))
    args: dict[str, Any] = {"table": table}
    if tool != "supabase_insert" and (n_filters or rarely()):
        args["filters"] = [a_filter() for _ in range(n_filters)]
    if tool == "supabase_select":
        if draw(st.booleans()):
            args["columns"] = [column() for _ in range(draw(st.integers(0, 4)))]
        if draw(st.booleans()):
            args["order"] = [
                {"column": column(), "desc": flag()} for _ in range(draw(st.integers(1, 2)))
            ]
        if draw(st.booleans()):
            args["limit"] = draw(ints)
        if draw(st.booleans()):
            args["offset"] = draw(ints)
        if draw(st.booleans()):
            args["count"] = flag()
    elif tool == "supabase_insert":
        args["rows"] = [
            {column(): value() for _ in range(draw(st.integers(1, 4)))}
            for _ in range(draw(st.integers(1, 3)))
        ]
    else:
        args["values"] = {column(): value() for _ in range(draw(st.integers(1, 3)))}
    if rarely():
        args[draw(st.sampled_from(["select", "or", "on_conflict", "raw"]))] = draw(scalars)
    return tool, args


calls = st.one_of(
    near_valid(),
    near_valid(),
    near_valid(),
    near_valid(),
    st.tuples(st.just("supabase_select"), select_args),
    st.tuples(st.just("supabase_select"), select_args),
    st.tuples(st.just("supabase_insert"), insert_args),
    st.tuples(st.just("supabase_update"), update_args),
    st.tuples(st.just("supabase_update"), update_args),
    st.tuples(
        st.sampled_from(["supabase_select", "supabase_insert", "supabase_update"]),
        st.dictionaries(st.text(max_size=8), json_values, max_size=4),
    ),
)


def check_request(req: Request, tool: str) -> None:
    assert req.path.startswith("/rest/v1/"), req.path
    table = req.path.removeprefix("/rest/v1/")
    assert table in TABLES, req.path
    allowed = ALLOWED[table]

    def column_ok(name: str) -> bool:
        if allowed is not None:
            return name in allowed
        return bool(IDENTIFIER.match(name)) and name.lower() not in RESERVED

    expected_method = {
        "supabase_select": "GET",
        "supabase_insert": "POST",
        "supabase_update": "PATCH",
    }[tool]
    assert req.method == expected_method
    if req.method != "GET":
        assert table in WRITABLE
    filters = 0
    limits = []
    for key, value in req.params:
        if key == "select":
            assert (value == "*" and allowed is None) or all(
                column_ok(c) for c in value.split(",")
            ), value
        elif key == "order":
            for term in value.split(","):
                column, _, direction = term.rpartition(".")
                assert column_ok(column) and direction in ("asc", "desc"), value
        elif key == "limit":
            limits.append(int(value))
        elif key == "offset":
            assert int(value) >= 0
        elif key == "columns":
            assert req.method == "POST"
            assert all(c.startswith('"') and column_ok(c.strip('"')) for c in value.split(",")), (
                value
            )
        else:
            assert column_ok(key), key
            assert FILTER_VALUE.match(value) or value in ("is.null", "not.is.null"), value
            filters += 1
    if req.method == "GET":
        # One bounded page: the user's frame takes up to frame_rows in pages of PAGE_ROWS.
        assert len(limits) == 1 and 0 <= limits[0] <= PAGE_ROWS, req.query
    else:
        assert limits == []
    if req.method == "PATCH":
        assert filters >= 1, req.query
    body = req.json
    if req.method == "POST":
        assert isinstance(body, list) and body
        assert all(column_ok(k) for row in body for k in row), body
    if req.method == "PATCH":
        assert isinstance(body, dict) and body and all(column_ok(k) for k in body), body


@pytest.mark.slow  # a few seconds of generated requests
def test_every_request_that_leaves_stays_inside_the_allowlist():
    with CaptureServer() as server:
        client = create_client(server.url, "anon-key")
        conn: Connector = supabase_tools(
            client=lambda ctx: client, tables=TABLES, max_rows=MAX_ROWS, approve_writes=False
        )
        sent = {"refused": 0, "sent": 0}

        @settings(
            max_examples=250,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow],
        )
        @given(calls)
        def run(call: tuple[str, dict[str, Any]]) -> None:
            tool, args = call
            server.clear()
            ctx = RunContext(agent="a", thread_id="t")
            try:
                out = asyncio.run(conn.tools[tool].call(args, ctx))
            except ToolInputError:
                assert server.requests == [], "a refused call sent a request"
                sent["refused"] += 1
                return
            assert not out.is_error, out.content
            assert len(server.requests) == 1
            sent["sent"] += 1
            check_request(server.requests[0], tool)
            json.dumps(args, default=str)

        run()
    # the generator reaches both sides: requests that leave, and refusals
    assert sent["sent"] > 20 and sent["refused"] > 20, sent
