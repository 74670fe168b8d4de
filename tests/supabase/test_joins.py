"""Joins along declared relationships, and the user's frame past max_rows, end to end
(supabase-py -> the shim -> PostgreSQL with row level security): an embed along the declared
foreign key returns what the SQL join returns for this user, anything undeclared or not
allowlisted is refused before any request, and a large result comes in bounded pages."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from typing import Any

import pytest
from supabase import ClientOptions, create_client

from loom_nb import ReplayModel, Reply, RunContext, ToolInputError, UserError, define_agent
from loom_nb._code import call_words
from loom_nb.supabase import supabase_tools
from tests.supabase.rig import USER_A, USER_B, Rig

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

TABLES = {
    "orders": {"columns": ["id", "user_id", "status", "total"]},
    "profiles": {"columns": ["id", "email"]},
}
RELATIONSHIPS = {"orders.user_id": "profiles.id"}


def factory(rig: Rig) -> Any:
    def user_client(ctx: Any) -> Any:
        headers = {"Authorization": f"Bearer {ctx['jwt']}"}
        return create_client(rig.url, rig.anon_key, options=ClientOptions(headers=headers))

    return user_client


def run(rig: Rig, calls: list[tuple[str, dict[str, Any]]], user: Any = USER_A, **options: Any):
    tools = supabase_tools(
        client=factory(rig), tables=TABLES, relationships=RELATIONSHIPS, **options
    )
    model = ReplayModel([*(Reply("", [c]) for c in calls), "done"])
    agent = define_agent(name="analyst", model=model, connectors=[tools])
    return agent.run_sync("orders?", context={"jwt": rig.jwt(user)})


def sql(rig: Rig, query: str, *params: Any) -> list[tuple[Any, ...]]:
    with rig.superuser() as conn:
        return conn.execute(query, params).fetchall()


def test_an_embed_along_the_declared_key_is_the_sql_join_under_rls(rig: Rig) -> None:
    args = {
        "table": "orders",
        "join": ["profiles"],
        "columns": ["id", "total", "profiles.email"],
        "order": [{"column": "id"}],
    }
    for user in (USER_A, USER_B):
        rig.shim.clear()
        frame = run(rig, [("supabase_select", args)], user).frames[0]
        expected = sql(
            rig,
            "SELECT o.id, o.total, p.email FROM orders o LEFT JOIN profiles p ON p.id = o.user_id "
            "WHERE o.user_id = %s ORDER BY o.id",  # the orders policy: a user's own rows
            user.id,
        )
        assert expected  # the seed gives each user orders
        assert list(frame.columns) == ["id", "total", "profiles.email"]
        assert [tuple(r) for r in frame.itertuples(index=False)] == [
            (i, float(t), e) for i, t, e in expected
        ]
        [request] = rig.shim.log
        assert dict(request.query)["select"] == "id,total,profiles!user_id(email)"
        assert rig.shim.refused == []


def test_a_filter_on_the_joined_table_is_an_inner_embed(rig: Rig) -> None:
    email = sql(rig, "SELECT email FROM profiles WHERE id = %s", USER_A.id)[0][0]
    args = {
        "table": "orders",
        "join": ["profiles"],
        "columns": ["id", "profiles.email"],
        "filters": [{"column": "profiles.email", "op": "eq", "value": email}],
        "order": [{"column": "profiles.email", "desc": True}, {"column": "id"}],
    }
    rig.shim.clear()
    result = run(rig, [("supabase_select", args)])
    frame = result.frames[0]
    expected = sql(
        rig,
        "SELECT o.id FROM orders o JOIN profiles p ON p.id = o.user_id "
        "WHERE o.user_id = %s AND p.email = %s ORDER BY o.id",
        USER_A.id,
        email,
    )
    assert frame["id"].tolist() == [r[0] for r in expected]
    assert set(frame["profiles.email"]) == {email}
    query = dict(rig.shim.log[0].query)
    assert query["select"] == "id,profiles!user_id!inner(email)"
    assert query["profiles.email"] == f"eq.{email}"
    assert query["order"] == "profiles(email).desc,id.asc"
    assert rig.shim.refused == []


def test_an_undeclared_or_unlisted_embed_is_refused_before_any_request(rig: Rig) -> None:
    undeclared = supabase_tools(client=factory(rig), tables=TABLES)
    with pytest.raises(ToolInputError, match="'join' was unexpected"):
        undeclared.tools["supabase_select"].validate({"table": "orders", "join": ["profiles"]})
    declared = supabase_tools(client=factory(rig), tables=TABLES, relationships=RELATIONSHIPS)
    rig.shim.clear()
    for args in (
        {"table": "orders", "join": ["secrets"]},
        {"table": "profiles", "join": ["orders"]},  # declared from orders only
        {"table": "orders", "columns": ["profiles.email"]},  # not joined
        {"table": "orders", "join": ["profiles"], "columns": ["profiles.display_name"]},
    ):
        result = run(rig, [("supabase_select", args)])
        [r] = list(result.thread.tool_results())
        assert r.is_error, args
    assert rig.shim.log == []  # nothing reached the server
    del declared
    with pytest.raises(UserError, match="both tables of a relationship must be allowlisted"):
        supabase_tools(
            client=factory(rig),
            tables={"orders": {"columns": ["id", "user_id"]}},
            relationships=RELATIONSHIPS,
        )
    with pytest.raises(UserError, match="not among the allowed columns"):
        supabase_tools(
            client=factory(rig),
            tables={"orders": {"columns": ["id"]}, "profiles": {"columns": ["id"]}},
            relationships=RELATIONSHIPS,
        )


def test_the_shim_refuses_an_embed_without_the_declared_key(rig: Rig) -> None:
    """The shim reads the relationship as PostgREST's findRel: a hint that names no foreign key
    of the origin to the target is PGRST200, not a guess."""
    client = factory(rig)({"jwt": rig.jwt(USER_A)})
    from postgrest.exceptions import APIError

    with pytest.raises(APIError) as caught:  # no match=: an APIError's str() is empty
        client.table("orders").select("id,profiles!status(email)").execute()
    assert caught.value.code == "PGRST200"
    assert (caught.value.message or "").startswith(
        "Could not find a relationship between 'orders' and 'profiles'"
    )


@pytest.fixture
def weekly_statuses(rig: Rig) -> Iterator[int]:
    """Orders of user A under 53 statuses of their own, three each."""
    with rig.superuser() as conn:
        conn.execute(
            "INSERT INTO orders (user_id, status, total) "
            "SELECT %s, 'week ' || lpad((i %% 53 + 1)::text, 2, '0'), i FROM "
            "generate_series(1, 159) AS i",
            (USER_A.id,),
        )
    (groups,) = sql(rig, "SELECT count(DISTINCT status) FROM orders WHERE user_id = %s", USER_A.id)[
        0
    ]
    yield int(groups)
    with rig.superuser() as conn:
        conn.execute("DELETE FROM orders WHERE status LIKE 'week %'")


def test_a_53_group_aggregate_gives_the_user_every_group_in_bounded_requests(
    rig: Rig, weekly_statuses: int
) -> None:
    with rig.superuser() as conn:
        conn.execute("ALTER ROLE authenticator SET pgrst.db_aggregates_enabled = 'true'")
    try:
        rig.shim.clear()
        args = {"table": "orders", "group_by": ["status"]}
        tools = supabase_tools(client=factory(rig), tables=TABLES, max_rows=10, aggregates=True)
        agent = define_agent(
            name="a",
            model=ReplayModel([Reply("", [("supabase_aggregate", args)]), "done"]),
            connectors=[tools],
        )
        result = agent.run_sync("by status", context={"jwt": rig.jwt(USER_A)})
        frame = result.frames[0]
        assert len(frame) == weekly_statuses >= 53  # not cut at max_rows (10)
        expected = sql(
            rig,
            "SELECT status, count(*) FROM orders WHERE user_id = %s GROUP BY status "
            "ORDER BY status",
            USER_A.id,
        )
        assert [tuple(r) for r in frame.itertuples(index=False)] == expected
        assert len(rig.shim.log) == 1  # one page of at most 1,000 groups
        [r] = list(result.thread.tool_results())
        assert " rows=10 " in r.content
        assert f"The user's DataFrame of this call holds {weekly_statuses} groups." in r.content
    finally:
        with rig.superuser() as conn:
            conn.execute("ALTER ROLE authenticator RESET pgrst.db_aggregates_enabled")


def test_a_large_select_comes_in_bounded_pages_and_says_where_frame_rows_cut_it(
    rig: Rig, weekly_statuses: int
) -> None:
    (total,) = sql(rig, "SELECT count(*) FROM orders WHERE user_id = %s", USER_A.id)[0]
    rig.shim.clear()
    args = {"table": "orders", "order": [{"column": "id"}], "count": True}
    result = run(rig, [("supabase_select", args)], max_rows=5, frame_rows=100)
    frame = result.frames[0]
    expected = sql(rig, "SELECT id FROM orders WHERE user_id = %s ORDER BY id LIMIT 100", USER_A.id)
    assert frame["id"].tolist() == [r[0] for r in expected]
    assert len(rig.shim.log) == 1  # 100 rows: one page
    [r] = list(result.thread.tool_results())
    assert f"holds 100 of {total} rows (frame_rows=100 cut it)" in r.content
    rig.shim.clear()
    paged = run(rig, [("supabase_select", {"table": "orders", "order": [{"column": "id"}]})])
    assert len(paged.frames[0]) == total
    limits = [dict(s.query)["limit"] for s in rig.shim.log]
    assert limits and all(int(n) <= 1000 for n in limits)


# ---- aggregates over a join: PostgREST's spread embeds --------------------------------------


@pytest.fixture
def aggregates_on(rig: Rig) -> Iterator[None]:
    with rig.superuser() as conn:
        conn.execute("ALTER ROLE authenticator SET pgrst.db_aggregates_enabled = 'true'")
    yield
    with rig.superuser() as conn:
        conn.execute("ALTER ROLE authenticator RESET pgrst.db_aggregates_enabled")


BY_EMAIL = {
    "table": "orders",
    "join": ["profiles"],
    "group_by": ["profiles.email", "status"],
    "aggregates": [
        {"fn": "count"},
        {"fn": "sum", "column": "total"},
        {"fn": "count", "column": "profiles.id"},
        {"fn": "max", "column": "profiles.email"},
    ],
}


def test_an_aggregate_by_a_joined_column_is_the_sql_join_grouped_under_rls(
    rig: Rig, aggregates_on: None, weekly_statuses: int
) -> None:
    for user in (USER_A, USER_B):
        rig.shim.clear()
        result = run(rig, [("supabase_aggregate", BY_EMAIL)], user, aggregates=True, max_rows=5)
        frame = result.frames[0]
        expected = sql(
            rig,
            "SELECT p.email, o.status, count(*), sum(o.total), count(p.id), max(p.email) "
            "FROM orders o LEFT JOIN profiles p ON p.id = o.user_id WHERE o.user_id = %s "
            "GROUP BY p.email, o.status ORDER BY p.email, o.status",
            user.id,
        )
        assert list(frame.columns) == [
            "profiles.email",
            "status",
            "count",
            "sum_total",
            "count_profiles.id",
            "max_profiles.email",
        ]
        assert [(e, s, n, float(t), k, m) for e, s, n, t, k, m in expected] == [
            tuple(r) for r in frame.itertuples(index=False)
        ]
        assert len(frame) == len(expected) > (5 if user is USER_A else 1)  # past max_rows
        [request] = rig.shim.log
        assert dict(request.query)["select"] == (
            "status,count:count(),sum_total:total.sum(),"
            "...profiles!user_id(email,count_profiles_id:id.count(),"
            "max_profiles_email:email.max())"
        )
        assert dict(request.query)["order"] == "profiles(email).asc,status.asc"
        assert rig.shim.refused == []
    [call] = [c for m in result.thread.messages for c in m.tool_calls]
    tool = supabase_tools(
        client=factory(rig), tables=TABLES, relationships=RELATIONSHIPS, aggregates=True
    ).tools["supabase_aggregate"]
    assert call_words(call, tool) == (
        "supabase_aggregate · orders · join profiles on orders.user_id = profiles.id · count, "
        "sum(total), count(profiles.id), max(profiles.email) by profiles.email, status"
    )


def test_a_filter_on_the_joined_table_makes_the_spread_inner(rig: Rig, aggregates_on: None) -> None:
    email = sql(rig, "SELECT email FROM profiles WHERE id = %s", USER_A.id)[0][0]
    args = {
        "table": "orders",
        "join": ["profiles"],
        "group_by": ["status"],
        "filters": [{"column": "profiles.email", "op": "eq", "value": email}],
    }
    for user, mine in ((USER_A, True), (USER_B, False)):
        rig.shim.clear()
        frame = run(rig, [("supabase_aggregate", args)], user, aggregates=True).frames[0]
        expected = sql(
            rig,
            "SELECT o.status, count(*) FROM orders o JOIN profiles p ON p.id = o.user_id "
            "WHERE o.user_id = %s AND p.email = %s GROUP BY o.status ORDER BY o.status",
            user.id,
            email,
        )
        assert bool(expected) is mine  # B's orders are not A's: no group at all
        assert [tuple(r) for r in frame.itertuples(index=False)] == expected
        assert list(frame.columns) == ["status", "count"]  # the spread's count is left out
        query = dict(rig.shim.log[0].query)
        assert query["select"] == (
            "status,count:count(),...profiles!user_id!inner(joined_profiles:id.count())"
        )
        assert query["profiles.email"] == f"eq.{email}"
        assert rig.shim.refused == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"aggregates": [{"fn": "std", "column": "total"}]}, "PostgREST cannot compute std"),
        ({"aggregates": [{"fn": "var", "column": "total"}]}, "PostgREST cannot compute var"),
        (
            {"aggregates": [{"fn": "percentile", "column": "total", "p": 0.9}]},
            "PostgREST cannot compute percentile",
        ),
        ({"aggregates": [{"fn": "median", "column": "total"}]}, "PostgREST cannot compute median"),
        (
            {"group_by": [{"column": "total", "bins": 10}]},
            "PostgREST cannot group by bins",
        ),
        (
            {"group_by": [{"column": "total", "bucket": "week"}]},
            "PostgREST cannot group by a time bucket",
        ),
        ({"join": ["secrets"]}, "no declared relationship to 'secrets'"),
        ({"group_by": ["profiles.email"]}, "which this call does not join"),
        ({"join": ["profiles"], "group_by": ["id", "profiles.id"]}, "both as 'id'"),
        (
            {
                "join": ["profiles"],
                "aggregates": [{"fn": "max", "column": "profiles.display_name"}],
            },
            "not available in 'profiles'",
        ),
    ],
)
def test_what_postgrest_cannot_aggregate_is_refused_by_name_before_any_request(
    rig: Rig, aggregates_on: None, args: dict[str, Any], message: str
) -> None:
    tools = supabase_tools(
        client=factory(rig), tables=TABLES, relationships=RELATIONSHIPS, aggregates=True
    )
    ctx = RunContext("a", "t", data={"jwt": rig.jwt(USER_A)})
    with pytest.raises(ToolInputError, match=re.escape(message)):  # past the schema too
        asyncio.run(tools.tools["supabase_aggregate"].function({"table": "orders", **args}, ctx))
    result = run(rig, [("supabase_aggregate", {"table": "orders", **args})], aggregates=True)
    [r] = list(result.thread.tool_results())
    assert r.is_error
    # What the model reads names the reason too, not only "is not one of [...]": the schema's
    # check, which comes first, says it in its own words ("cannot compute median, std or var").
    # (The others' "is not one of [...]" names the choices, which is enough there.)
    words = message.split()
    if words[:2] == ["PostgREST", "cannot"]:
        assert " ".join(words[:3]) in r.content and words[-1] in r.content, r.content
    assert rig.shim.log == []  # not one request


def test_an_exported_aggregate_over_a_join_gives_the_same_frame(
    rig: Rig, aggregates_on: None, weekly_statuses: int, tmp_path: Any
) -> None:
    import nbformat
    from pandas.testing import assert_frame_equal

    tools = supabase_tools(
        client=factory(rig), tables=TABLES, relationships=RELATIONSHIPS, aggregates=True
    )
    agent = define_agent(
        name="analyst",
        model=ReplayModel([Reply("", [("supabase_aggregate", BY_EMAIL)]), "ok"]),
        connectors=[tools],
    )
    context = {"jwt": rig.jwt(USER_A)}
    thread_id = agent.run_sync("by email", context=context).thread_id
    path = agent.export(thread_id, tmp_path / "t.ipynb", context=context)
    nb = nbformat.read(path, as_version=4)
    namespace: dict[str, Any] = {"user_client": factory(rig), "context": context}
    for cell in nb.cells:
        if cell.cell_type == "code":
            exec(cell.source, namespace)
    frame = agent.thread(thread_id).frames[0]
    assert len(frame) > 50
    assert_frame_equal(namespace["result_1"], frame)
