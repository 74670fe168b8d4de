"""``supabase_tools(..., aggregates=True)``: totals by PostgREST's aggregate functions, end to
end (supabase-py -> the shim -> PostgreSQL with row level security): every matching row
counted however small ``max_rows`` is, never a foreign user's row, hostile identifiers refused
before any request, and the shim reading PostgREST's aggregate grammar as PostgREST does."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import httpx
import pandas as pd
import pytest
from pandas.testing import assert_frame_equal
from supabase import ClientOptions, create_client

from loom_nb import ReplayModel, Reply, RunContext, ToolInputError, UserError, define_agent
from loom_nb._code import call_words
from loom_nb.supabase import supabase_tools
from tests.supabase.rig import USER_A, USER_B, Rig

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

TABLES = {
    "orders": {"columns": ["id", "status", "total", "created_at"]},
    "orders_by_week": {"columns": ["status", "total", "week"]},
}


@pytest.fixture
def aggregates_on(rig: Rig) -> Iterator[None]:
    """``pgrst.db_aggregates_enabled`` on, as a project owner sets it for PostgREST."""
    with rig.superuser() as conn:
        conn.execute("ALTER ROLE authenticator SET pgrst.db_aggregates_enabled = 'true'")
    yield
    with rig.superuser() as conn:
        conn.execute("ALTER ROLE authenticator RESET pgrst.db_aggregates_enabled")


@pytest.fixture
def many_orders(rig: Rig) -> Iterator[None]:
    """10,000 more orders of user A and 3,000 of user B, and a weekly view with the caller's
    row level security (the README's way to time buckets)."""
    with rig.superuser() as conn:
        for user, n in ((USER_A, 10_000), (USER_B, 3_000)):
            conn.execute(
                "INSERT INTO orders (user_id, status, total, created_at) "
                "SELECT %s, (ARRAY['new','paid','shipped'])[1 + i %% 3], (i %% 997) / 4.0, "
                "timestamptz '2026-01-01' + i * interval '37 minutes' "
                "FROM generate_series(1, %s) AS i",
                (user.id, n),
            )
        conn.execute(
            "CREATE VIEW orders_by_week WITH (security_invoker = true) AS "
            "SELECT *, date_trunc('week', created_at) AS week FROM orders"
        )
        conn.execute("GRANT SELECT ON orders_by_week TO authenticated")
    yield
    with rig.superuser() as conn:
        conn.execute("DROP VIEW orders_by_week")


def factory(rig: Rig) -> Any:
    def user_client(ctx: Any) -> Any:
        headers = {"Authorization": f"Bearer {ctx['jwt']}"}
        return create_client(rig.url, rig.anon_key, options=ClientOptions(headers=headers))

    return user_client


def run(rig: Rig, calls: list[tuple[str, dict[str, Any]]], user: Any = USER_A) -> Any:
    tools = supabase_tools(client=factory(rig), tables=TABLES, max_rows=50, aggregates=True)
    model = ReplayModel([Reply("", calls), "done"])
    agent = define_agent(name="analyst", model=model, connectors=[tools])
    return agent.run_sync("totals?", context={"jwt": rig.jwt(user)})


def sql(rig: Rig, query: str, *params: Any) -> list[tuple[Any, ...]]:
    with rig.superuser() as conn:
        return conn.execute(query, params).fetchall()


ALL = [
    {"fn": "count"},
    {"fn": "sum", "column": "total"},
    {"fn": "avg", "column": "total"},
    {"fn": "min", "column": "total"},
    {"fn": "max", "column": "created_at"},
]


def test_totals_cover_every_row_with_max_rows_50_and_never_a_foreign_one(
    rig: Rig, aggregates_on: None, many_orders: None
) -> None:
    for user in (USER_A, USER_B):
        result = run(rig, [("supabase_aggregate", {"table": "orders", "aggregates": ALL})], user)
        frame = result.frames[0]
        [(count, total, mean, low, high)] = sql(
            rig,
            "SELECT count(*), sum(total), avg(total), min(total), max(created_at) FROM orders "
            "WHERE user_id = %s",
            user.id,
        )
        assert count > 3_000  # far more rows than max_rows
        assert list(frame.columns) == [
            "count",
            "sum_total",
            "avg_total",
            "min_total",
            "max_created_at",
        ]
        assert frame["count"].tolist() == [count]
        assert Decimal(str(frame["sum_total"][0])) == total
        assert frame["avg_total"][0] == pytest.approx(float(mean))
        assert frame["min_total"][0] == float(low)
        assert frame["max_created_at"][0] == pd.Timestamp(high)
    sent = [dict(s.query)["select"] for s in rig.shim.log]
    assert sent[0] == (
        "count:count(),sum_total:total.sum(),avg_total:total.avg(),min_total:total.min(),"
        "max_created_at:created_at.max()"
    )
    assert rig.shim.refused == []


def test_groups_with_filters_order_and_paging(
    rig: Rig, aggregates_on: None, many_orders: None
) -> None:
    args = {
        "table": "orders",
        "group_by": ["status"],
        "aggregates": [{"fn": "count"}, {"fn": "sum", "column": "total"}],
        "filters": [{"column": "total", "op": "gt", "value": 100}],
        "order": [{"column": "status", "desc": True}],
    }
    result = run(
        rig,
        [("supabase_aggregate", args), ("supabase_aggregate", {**args, "limit": 1, "offset": 1})],
    )
    full, page = result.frames
    expected = sql(
        rig,
        "SELECT status, count(*), sum(total) FROM orders WHERE user_id = %s AND total > 100 "
        "GROUP BY status ORDER BY status DESC",
        USER_A.id,
    )
    assert full["status"].tolist() == [r[0] for r in expected]
    assert full["count"].tolist() == [r[1] for r in expected]
    assert [Decimal(str(v)) for v in full["sum_total"]] == [r[2] for r in expected]
    assert_frame_equal(page, full.iloc[1:2].reset_index(drop=True))
    first = next(c for m in result.thread.messages for c in m.tool_calls)
    tool = supabase_tools(client=factory(rig), tables=TABLES, aggregates=True).tools
    assert call_words(first, tool["supabase_aggregate"]) == (
        "supabase_aggregate · orders · count, sum(total) by status · total > 100 · "
        "order by status desc"
    )


def test_time_buckets_come_from_an_allowlisted_view_with_the_callers_rls(
    rig: Rig, aggregates_on: None, many_orders: None
) -> None:
    args = {"table": "orders_by_week", "group_by": ["week"], "order": [{"column": "week"}]}
    frame = run(rig, [("supabase_aggregate", args)], USER_B).frames[0]
    expected = sql(
        rig,
        "SELECT date_trunc('week', created_at), count(*) FROM orders WHERE user_id = %s "
        "GROUP BY 1 ORDER BY 1 LIMIT 50",
        USER_B.id,
    )
    assert frame["count"].tolist() == [r[1] for r in expected]
    assert frame["week"].tolist() == [pd.Timestamp(r[0]) for r in expected]


def test_with_aggregates_off_the_model_is_told_how_to_turn_them_on(rig: Rig) -> None:
    result = run(rig, [("supabase_aggregate", {"table": "orders"})])
    [error] = list(result.thread.tool_results())
    assert error.is_error and "PGRST123" in error.content
    assert "pgrst.db_aggregates_enabled" in error.content
    assert [s.kind for s in rig.shim.log] == ["postgrest"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"table": "orders", "group_by": ["status;drop table orders"]}, "not a plain column"),
        ({"table": "orders", "group_by": ["user_id"]}, "not available in 'orders'"),
        ({"table": "orders", "aggregates": [{"fn": "sum", "column": "total)"}]}, "not a plain"),
        ({"table": "orders", "aggregates": [{"fn": "sum", "column": "meta->x"}]}, "not a plain"),
        ({"table": "orders", "aggregates": [{"fn": "sum(total)),count"}]}, "is not one of"),
        (
            {"table": "orders", "aggregates": [{"fn": "median", "column": "total"}]},
            "PostgREST cannot compute median",
        ),
        ({"table": "orders", "aggregates": [{"fn": "sum"}]}, "sum needs a column"),
        ({"table": "orders,secrets"}, "unknown table"),
        ({"table": "secrets"}, "unknown table"),
        (
            {"table": "orders", "order": [{"column": "count", "desc": True}]},
            "cannot order by a total",
        ),
        ({"table": "orders", "group_by": ["select"]}, "not a plain column"),
        (
            {
                "table": "orders",
                "group_by": ["status"],
                "aggregates": [{"fn": "count"}],
                "filters": [{"column": "status", "op": "in", "value": [" a", "\tb"]}],
            },
            "cannot be sent",
        ),
    ],
)
async def test_hostile_identifiers_are_refused_before_any_request(
    rig: Rig, aggregates_on: None, args: dict[str, Any], message: str
) -> None:
    # Through the agent: the schema or the checks refuse it, and the model is told.
    result = await asyncio.to_thread(run, rig, [("supabase_aggregate", args)])
    [error] = list(result.thread.tool_results())
    assert error.is_error
    # The checks alone, past the schema (as a tool called without it would be).
    tool = supabase_tools(client=factory(rig), tables=TABLES, aggregates=True).tools
    with pytest.raises(ToolInputError, match=re.escape(message)):
        await tool["supabase_aggregate"].function(args, RunContext("a", "t", data={"jwt": "x"}))
    assert rig.shim.log == []  # not one request


def test_the_tool_exists_only_when_asked_for(rig: Rig) -> None:
    assert "supabase_aggregate" not in supabase_tools(client=factory(rig), tables=TABLES).tools
    with pytest.raises(UserError, match="aggregates must be True or False"):
        supabase_tools(client=factory(rig), tables=TABLES, aggregates="yes")  # type: ignore[arg-type]


def test_an_exported_aggregate_gives_the_same_frame(
    rig: Rig, aggregates_on: None, many_orders: None, tmp_path: Any
) -> None:
    import nbformat

    args = {"table": "orders", "group_by": ["status"], "aggregates": ALL}
    tools = supabase_tools(client=factory(rig), tables=TABLES, aggregates=True)
    agent = define_agent(
        name="analyst",
        model=ReplayModel([Reply("", [("supabase_aggregate", args)]), "ok"]),
        connectors=[tools],
    )
    context = {"jwt": rig.jwt(USER_A)}
    thread_id = agent.run_sync("totals", context=context).thread_id
    nb = nbformat.read(agent.export(thread_id, tmp_path / "t.ipynb", context=context), as_version=4)
    namespace: dict[str, Any] = {"user_client": factory(rig), "context": context}
    for cell in nb.cells:
        if cell.cell_type == "code":
            exec(cell.source, namespace)
    assert_frame_equal(namespace["result_1"], agent.thread(thread_id).frames[0])


# ---- the shim reads PostgREST's grammar ------------------------------------------------------


def get(rig: Rig, select: str, **params: str) -> httpx.Response:
    headers = {"apikey": rig.anon_key, "Authorization": f"Bearer {rig.jwt(USER_A)}"}
    return httpx.get(
        f"{rig.url}/rest/v1/orders", params={"select": select, **params}, headers=headers
    )


def test_the_shim_names_and_groups_aggregates_as_postgrest_does(
    rig: Rig, aggregates_on: None
) -> None:
    # Without an alias, PostgreSQL names a column after its function (pgFmtSelectItem).
    assert get(rig, "total.sum(),count()").json() == [{"sum": 165.49, "count": 3}]
    # Plain columns are the groups (groupF); count() counts rows (COUNT(orders.*)).
    rows = get(rig, "status,n:count()", order="status").json()
    assert rows == [
        {"status": "new", "n": 1},
        {"status": "paid", "n": 1},
        {"status": "shipped", "n": 1},
    ]
    # A column beside an aggregate that PostgreSQL cannot group is PostgreSQL's error.
    assert get(rig, "status,n:count()", order="total").status_code == 400
    for outside in ("*,total.sum()", "total.sum()::text", "x:total", "total.median()"):
        assert get(rig, outside).status_code == 400
    kinds = [s.kind for s in rig.shim.log]
    assert kinds == ["ok", "ok", "database", "grammar", "grammar", "grammar", "grammar"]
    rig.shim.clear()  # the refusals above were the point
