"""Card = effect: for every filter operator and every class of value, what the approval card
says, what the model is told and what PostgREST executes agree.

The real supabase-py clients (sync and async) send to a recording stand-in; each request is
then read the way PostgREST's own parser reads it (``rig/postgrest.py``, written from
``QueryParams.hs`` and ``SqlFragment.hs``). A call either sends nothing and tells the model
what to send instead, or sends requests whose meaning is the card's filter, value for value.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from supabase import AsyncClientOptions, ClientOptions, acreate_client, create_client

from loom_nb import RunContext
from loom_nb._tables.filter_text import where_text
from loom_nb._tables.grammar import Filter
from loom_nb._tools import Connector, Tool, ToolInputError, ToolOutput
from loom_nb.supabase import supabase_tools
from tests.supabase._capture import CaptureServer, Reply, Request, rows_reply
from tests.supabase.rig import postgrest

KEY = "anon-key-for-tests"
TABLES: dict[str, Any] = {"tickets": {"columns": ["id", "title", "state"], "write": True}}
ROW = {"id": 1, "title": "t", "state": "open"}
RESERVED_PARAMS = {"select", "limit", "offset", "order", "columns"}

#: The value classes of issue 17, each once as a plain value and (below) inside lists.
VALUES: dict[str, Any] = {
    "empty": "",
    "star": "*",
    "percent": "10%",
    "underscore": "a_b",
    "single-quote": "o'brien",
    "double-quote": 'say "hi"',
    "comma": "a,b",
    "parentheses": "(x)",
    "backslash": "back\\slash",
    "nul": "open\x00 (never)",
    "unicode": "é ü 中 🙂",
    "unseen": "abc\u202edef\u200b",
    "lone-surrogate": "\ud800",
    "true": True,
    "false": False,
    "number-as-text": "100",
    "int": 7,
    "integral-float": 1.0,
    "huge-integral-float": 1e16,
    "fraction": 0.5,
    "none": None,
    "empty-list": [],
    "list-of-empty": [""],
    "list-of-one": ["open"],
    "list-of-star": ["*"],
    "list-with-nul": ["1\x00x"],
    "list-with-blank-first": [" padded", "x"],
    "list-of-one-blank": ["\tpadded"],
    "list-mixed": ["", "a,b", 2, True, 1.0, 'q"uote', "(p)"],
}
OPERATORS = ["eq", "neq", "gt", "gte", "lt", "lte", "like", "ilike", "in", "is_null"]

#: For each refusal, words the model's error must hold: what to do instead.
FIXES = {
    "nul": "remove it",
    "surrogate": "send it as UTF-8 text",
    "star": "use '_' (any one character)",
    "null": "use op 'is_null'",
    "list": "expected a string, number or boolean",
    "in-scalar": "'in' takes a non-empty list",
    "pattern": "takes a string pattern",
    "is_null-value": "is_null takes no value",
}


def expected_refusal(op: str, value: Any) -> str | None:
    """Which fix the model must be told, or None when the call is sent."""
    if op == "is_null":
        return None if value is None else "is_null-value"
    if op == "in":
        if not isinstance(value, list) or not value:
            return "in-scalar"
        items = value
    elif isinstance(value, list):
        return "pattern" if op in ("like", "ilike") else "list"
    elif value is None:
        return "pattern" if op in ("like", "ilike") else "null"
    elif op in ("like", "ilike") and not isinstance(value, str):
        return "pattern"
    else:
        items = [value]
    for item in items:
        if isinstance(item, str) and "\x00" in item:
            return "nul"
        if isinstance(item, str) and "\ud800" in item:
            return "surrogate"
    if op in ("like", "ilike") and "*" in value:
        return "star"
    return None


# ---- what the card says, read as PostgREST would receive it -------------------------------------


def as_text(value: Any) -> str:
    """How a card value reaches PostgREST: supabase-py's serializer, on the value as the card
    shows it (integral numbers already in integer form)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def card_meaning(f: dict[str, Any]) -> postgrest.Meaning:
    negate = bool(f.get("not"))
    if f["op"] == "is_null":
        return postgrest.Meaning(negate, "is", ("null",))
    if f["op"] == "in":
        return postgrest.Meaning(negate, "in", tuple(as_text(v) for v in f["value"]))
    return postgrest.Meaning(negate, f["op"], (as_text(f["value"]),))


def request_meaning(req: Request) -> list[tuple[str, postgrest.Meaning]]:
    """The filters of a captured request, as PostgREST's parser reads them."""
    out = []
    for key, value in postgrest.parse_query(req.query):
        if value is None or key in RESERVED_PARAMS:
            continue
        out.append((key, postgrest.meaning(postgrest.parse_op_expr(value))))
    return out


def card_filters(card: dict[str, Any]) -> list[Filter]:
    return [
        Filter(
            f["column"],
            f["op"],
            tuple(f["value"]) if isinstance(f.get("value"), list) else f.get("value"),
            bool(f.get("not")),
        )
        for f in card["filters"]
    ]


# ---- the rig ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[CaptureServer]:
    def answer(req: Request) -> Reply:
        if req.method == "PATCH":
            return Reply(200, [ROW])
        return rows_reply([ROW], total=1)

    with CaptureServer() as s:
        s.responder = answer
        yield s


@pytest.fixture(params=["sync", "async"])
def connector(request: pytest.FixtureRequest, server: CaptureServer) -> Connector:
    """The connector over a real client of each kind, made once for the test (the factory
    would make one per run; making one takes about 80 ms)."""
    made: dict[str, Any] = {}
    factory: Callable[[RunContext], Any]
    if request.param == "sync":
        options = ClientOptions(headers={"Authorization": "Bearer user-jwt"})
        made["client"] = create_client(server.url, KEY, options=options)
        factory = lambda ctx: made["client"]  # noqa: E731
    else:

        async def factory(ctx: RunContext) -> Any:
            if "client" not in made:
                options = AsyncClientOptions(headers={"Authorization": "Bearer user-jwt"})
                made["client"] = await acreate_client(server.url, KEY, options=options)
            return made["client"]

    return supabase_tools(client=factory, tables=TABLES)


async def answer(tool: Tool, args: dict[str, Any], ctx: RunContext) -> ToolOutput:
    """What the run makes of a call: a refused input is an error result."""
    try:
        return await tool.call(args, ctx)
    except ToolInputError as exc:
        return ToolOutput(json.dumps({"error": str(exc)}), is_error=True)


def a_filter(op: str, value: Any, negate: bool) -> dict[str, Any]:
    f: dict[str, Any] = {"column": "title", "op": op, "not": negate}
    if value is not None or op != "is_null":
        f["value"] = value
    return f


async def check_one(conn: Connector, server: CaptureServer, op: str, value: Any, negate: bool):
    """One filter through the update tool, as the run does it: the card (its preview), then
    the approved PATCH with the card in the context; and through select."""
    update = conn.tools["supabase_update"]
    args = {
        "table": "tickets",
        "values": {"state": "closed"},
        "filters": [a_filter(op, value, negate)],
    }
    ctx = RunContext("analyst", "t1")
    server.clear()
    fix = expected_refusal(op, value)
    if fix is not None:
        # the schema may refuse first (a list where a scalar goes); either way: nothing sent
        # and the model is told what to send instead
        try:
            update.validate(args)
        except ToolInputError:
            assert server.requests == []
            return
        assert not update.requires_approval(args), "a call that cannot work waits for no one"
        out = await answer(update, args, ctx)
        message = json.loads(out.content or "")["error"] if out.is_error else ""
        assert out.is_error and FIXES[fix] in message, (op, value, message)
        select = await answer(
            conn.tools["supabase_select"], {"table": "tickets", "filters": args["filters"]}, ctx
        )
        assert select.is_error
        assert server.requests == []
        return
    update.validate(args)
    card = await update.make_preview(args, ctx)
    assert isinstance(card, dict), card
    (read,) = server.requests
    shown = [card_meaning(f) for f in card["filters"]]
    assert request_meaning(read) == [("title", m) for m in shown]
    assert card["where"] == where_text(card_filters(card))
    # the approved PATCH: the same meaning, bounded by the card's count
    server.clear()
    ctx.approved_preview = card
    out = await update.call(args, ctx)
    assert isinstance(out, ToolOutput) and not out.is_error, out.content
    (patch,) = server.requests
    assert patch.method == "PATCH"
    assert request_meaning(patch) == [("title", m) for m in shown]
    assert patch.headers["prefer"].endswith(f"handling=strict,max-affected={card['rows_matched']}")
    # select sends the same filter the same way
    server.clear()
    await conn.tools["supabase_select"].call({"table": "tickets", "filters": args["filters"]}, ctx)
    (got,) = server.requests
    assert request_meaning(got) == [("title", m) for m in shown]


@pytest.mark.parametrize("value", list(VALUES.values()), ids=list(VALUES))
async def test_every_operator_with_this_value_sends_what_the_card_says_or_nothing(
    connector, server, value
):
    for op in OPERATORS:
        for negate in (False, True):
            await check_one(connector, server, op, value, negate)


# ---- the translations, as the card shows them ----------------------------------------------------


@pytest.mark.parametrize(
    ("flt", "where", "sent"),
    [
        # in.() is PostgREST's empty list: [""] goes as eq '', which means IN ('')
        ({"op": "in", "value": [""]}, "title = ''", "eq."),
        ({"op": "in", "value": ["", ""], "not": True}, "NOT (title = '')", "not.eq."),
        # integral numbers in integer form, as integer columns need
        ({"op": "eq", "value": 1.0}, "title = 1", "eq.1"),
        ({"op": "gt", "value": 1e16}, "title > 10000000000000000", "gt.10000000000000000"),
        ({"op": "in", "value": [2.0, 3]}, "title IN (2, 3)", "in.(2,3)"),
        # % and _ are the pattern's wildcards, and mean just that
        ({"op": "like", "value": "10%"}, "title LIKE '10%'", "like.10%"),
        # what would not show on the card is written out
        (
            {"op": "eq", "value": "a\u202eb\nc"},
            "title = E'a\\u202eb\\nc'",
            "eq.a\u202eb\nc",
        ),
        ({"op": "eq", "value": "it's"}, "title = 'it''s'", "eq.it's"),
    ],
)
async def test_the_card_shows_the_filter_postgrest_runs(connector, server, flt, where, sent):
    server.clear()
    args = {
        "table": "tickets",
        "values": {"state": "closed"},
        "filters": [{"column": "title", **flt}],
    }
    card = await connector.tools["supabase_update"].make_preview(args, RunContext("a", "t"))
    assert card["where"] == where
    (req,) = server.requests
    assert [v for k, v in postgrest.parse_query(req.query) if k == "title"] == [sent]


async def test_not_in_empty_string_is_not_sent_as_the_empty_list(connector, server):
    """``not.in.()`` matches every row in PostgREST, NULLs included; the card says
    ``NOT (title IN (''))``, which matches the rows whose title is set and not ''."""
    server.clear()
    args = {
        "table": "tickets",
        "values": {"state": "closed"},
        "filters": [{"column": "title", "op": "in", "value": [""], "not": True}],
    }
    await connector.tools["supabase_update"].make_preview(args, RunContext("a", "t"))
    (req,) = server.requests
    [(_, meant)] = request_meaning(req)
    assert meant == postgrest.Meaning(True, "eq", ("",))
    assert "in." not in req.query


def test_the_model_is_told_how_postgrest_reads_patterns_and_what_an_update_card_shows():
    conn = supabase_tools(client=lambda ctx: None, tables=TABLES)
    select = conn.tools["supabase_select"].description
    assert "PostgREST reads * as % (a literal * cannot be matched; use _)" in select
    assert "cannot contain the NUL character" in select
    update = conn.tools["supabase_update"].description
    assert "if more rows match when the update runs, nothing is changed and you are told" in update


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([{"title": "a\x00b"}], "rows[0].title: the text holds a NUL character"),
        ([{"title": "ok"}, {"title": float("nan")}], "rows[1].title: nan is not a JSON number"),
        ([{"title": {"k": ["\ud800"]}}], "rows[0].title.k[0]: the text is not valid Unicode"),
    ],
)
async def test_row_values_postgres_cannot_take_are_refused_before_any_request(
    connector, server, rows, message
):
    server.clear()
    insert = connector.tools["supabase_insert"]
    assert not insert.requires_approval({"table": "tickets", "rows": rows})
    out = await answer(insert, {"table": "tickets", "rows": rows}, RunContext("a", "t"))
    assert out.is_error and message in json.loads(out.content or "")["error"]
    assert server.requests == []


async def test_integral_row_values_are_sent_in_integer_form(server):
    server.clear()
    conn = supabase_tools(
        client=lambda ctx: create_client(server.url, KEY), tables=TABLES, approve_writes=False
    )
    rows = [{"id": 3.0, "title": "x"}, {"id": 1e16, "title": "y"}]
    await conn.tools["supabase_insert"].call(
        {"table": "tickets", "rows": rows}, RunContext("a", "t")
    )
    (req,) = server.requests
    assert req.json == [{"id": 3, "title": "x"}, {"id": 10000000000000000, "title": "y"}]
    assert b'"id":3,' in req.body and b"10000000000000000" in req.body
