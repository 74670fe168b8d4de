"""The rig behaves like Supabase for the real supabase-py clients (sync and async).

If these fail, the integration tests prove nothing: RLS must hide rows, the service role must
see them all, writes must be checked by policies, and the shim must refuse what it does not
understand instead of guessing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from postgrest.exceptions import APIError
from supabase import AsyncClient, Client, ClientOptions, acreate_client, create_client

from tests.supabase.rig import JWT_SECRET, USER_A, USER_B, Rig, mint_jwt

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


def user_client(rig: Rig, token: str | None) -> Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return create_client(rig.url, rig.anon_key, options=ClientOptions(headers=headers))


def test_rls_shows_each_user_only_their_own_orders(rig: Rig) -> None:
    for user, expected in ((USER_A, [1, 2, 3]), (USER_B, [4, 5])):
        rows = (
            user_client(rig, rig.jwt(user))
            .table("orders")
            .select("id,user_id")
            .order("id")
            .execute()
            .data
        )
        assert [r["id"] for r in rows] == expected
        assert {r["user_id"] for r in rows} == {user.id}


def test_anon_key_alone_sees_no_orders_but_the_catalogue(rig: Rig) -> None:
    anon = user_client(rig, None)
    assert anon.table("orders").select("id").execute().data == []
    assert len(anon.table("products").select("id,name").execute().data) == 4


def test_service_role_bypasses_rls(rig: Rig) -> None:
    service = create_client(rig.url, rig.service_key)
    rows = service.table("orders").select("user_id").execute().data
    assert len(rows) == 5
    assert {r["user_id"] for r in rows} == {USER_A.id, USER_B.id}


async def test_async_client_gets_the_same_rls(rig: Rig) -> None:
    client: AsyncClient = await acreate_client(
        rig.url,
        rig.anon_key,
        options=ClientOptions(headers={"Authorization": f"Bearer {rig.jwt(USER_B)}"}),
    )
    response = (
        await client.table("orders")
        .select("id,total", count="exact")
        .order("total", desc=True)
        .limit(1)
        .execute()
    )
    assert response.data == [{"id": 4, "total": 999.00}]
    assert response.count == 2  # Content-Range: RLS applies to the count as well


def test_rows_come_back_as_postgrest_encodes_them(rig: Rig) -> None:
    row = (
        user_client(rig, rig.jwt(USER_A)).table("orders").select("*").eq("id", 1).execute().data[0]
    )
    assert row == {
        "id": 1,
        "user_id": USER_A.id,
        "status": "paid",
        "total": 120.5,
        "created_at": "2026-01-05T10:00:00+00:00",
        "meta": {"channel": "web", "token": "tok-a1"},
    }


def test_every_filter_operator_of_the_subset(rig: Rig) -> None:
    products = user_client(rig, rig.jwt(USER_A)).table("products")

    def names(build: Callable[[Any], Any]) -> list[str]:
        return [r["name"] for r in build(products.select("name")).order("name").execute().data]

    assert names(lambda q: q.eq("price", 9.99)) == ["Widget"]
    assert names(lambda q: q.neq("in_stock", True)) == ["Gizmo"]
    assert names(lambda q: q.gt("price", 35)) == ["Gizmo"]
    assert names(lambda q: q.gte("price", 35)) == ["Gadget", "Gizmo"]
    assert names(lambda q: q.lt("price", 9.99)) == ["Doohickey"]
    assert names(lambda q: q.lte("price", 9.99)) == ["Doohickey", "Widget"]
    assert names(lambda q: q.like("name", "G%")) == ["Gadget", "Gizmo"]
    assert names(lambda q: q.ilike("name", "%DGE%")) == ["Gadget", "Widget"]
    # Quoted list items: a comma inside a value does not split it.
    in_list = ["Widget", "Gizmo, large", "Gizmo"]
    assert names(lambda q: q.in_("name", in_list)) == ["Gizmo", "Widget"]
    assert names(lambda q: q.not_.in_("name", ["Widget", "Gizmo"])) == ["Doohickey", "Gadget"]
    assert names(lambda q: q.is_("name", None)) == []
    assert names(lambda q: q.not_.is_("name", None).gt("price", 100)) == ["Gizmo"]
    paged = products.select("name", count="exact").order("price").limit(2).offset(1).execute()
    assert [r["name"] for r in paged.data] == ["Widget", "Gadget"]
    assert paged.count == 4
    assert rig.shim.refused == []


def test_insert_is_checked_by_policies(rig: Rig) -> None:
    tickets = user_client(rig, rig.jwt(USER_A)).table("tickets")
    made = tickets.insert({"user_id": USER_A.id, "subject": "Lost parcel"}).execute().data
    assert made[0]["user_id"] == USER_A.id and made[0]["status"] == "open"
    with pytest.raises(APIError, match="violates row-level security policy") as refused:
        tickets.insert({"user_id": USER_B.id, "subject": "In Bob's name"}).execute()
    assert refused.value.code == "42501"
    with rig.superuser() as conn:
        subjects = [r[0] for r in conn.execute("SELECT subject FROM tickets ORDER BY id")]
    assert subjects == ["Where is my parcel?", "Refund please", "Lost parcel"]


def test_insert_missing_keys_follow_the_prefer_header(rig: Rig) -> None:
    tickets = user_client(rig, rig.jwt(USER_A)).table("tickets")
    # Prefer: missing=default -> user_id takes its default, auth.uid().
    rows = (
        tickets.insert([{"subject": "one"}, {"subject": "two", "body": "x"}], default_to_null=False)
        .execute()
        .data
    )
    assert [(r["subject"], r["user_id"], r["body"]) for r in rows] == [
        ("one", USER_A.id, ""),
        ("two", USER_A.id, "x"),
    ]
    # Without it, PostgREST sends NULL for a key another row has: body is NOT NULL.
    with pytest.raises(APIError, match=r'column "body" .* violates not-null') as refused:
        tickets.insert([{"subject": "three"}, {"subject": "four", "body": "y"}]).execute()
    assert refused.value.code == "23502"


def test_update_reaches_only_own_rows_and_needs_a_filter(rig: Rig) -> None:
    tickets = user_client(rig, rig.jwt(USER_A)).table("tickets")
    assert tickets.update({"status": "closed"}).eq("id", 2).execute().data == []  # Bob's
    changed = tickets.update({"status": "closed"}).eq("id", 1).execute().data
    assert [(r["id"], r["status"]) for r in changed] == [(1, "closed")]
    with pytest.raises(APIError, match="violates row-level security policy") as moved:
        tickets.update({"user_id": USER_B.id}).eq("id", 1).execute()
    assert moved.value.code == "42501"
    with pytest.raises(APIError, match="UPDATE requires a WHERE clause") as unfiltered:
        tickets.update({"status": "open"}).execute()
    assert unfiltered.value.code == "21000"
    with rig.superuser() as conn:
        rows = conn.execute("SELECT id, status, user_id::text FROM tickets ORDER BY id").fetchall()
    assert rows == [(1, "closed", USER_A.id), (2, "pending", USER_B.id)]


def test_secrets_table_is_readable_without_the_allowlist(rig: Rig) -> None:
    """Why the connector's allowlist matters: the table has no RLS, as in many projects."""
    rows = user_client(rig, rig.jwt(USER_B)).table("secrets").select("value").execute().data
    assert rows == [{"value": "sk_live_NEVER_SHOW_THIS"}]


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda c: c.table("orders").select("id,profiles(email)"), id="embed"),
        pytest.param(lambda c: c.table("orders").select("id,profiles!inner(email)"), id="inner"),
        pytest.param(lambda c: c.table("orders").select("...profiles(email)"), id="spread"),
        pytest.param(lambda c: c.table("orders").select("pw:status"), id="alias"),
        pytest.param(lambda c: c.table("orders").select("meta->>token"), id="json-path"),
        pytest.param(lambda c: c.table("orders").select("id::text"), id="cast"),
        # Aggregates are PostgREST's grammar (test_aggregate.py); casts on them are not ours.
        pytest.param(lambda c: c.table("orders").select("total.sum()::text"), id="aggregate-cast"),
        pytest.param(
            lambda c: c.table("orders").select("id").eq("meta->>token", "x"), id="json-path-filter"
        ),
        pytest.param(
            lambda c: c.table("orders").select("id").eq("secrets.value", "x"), id="dotted-filter"
        ),
        pytest.param(lambda c: c.table("orders").select("id").eq("limit", "x"), id="reserved"),
        pytest.param(lambda c: c.table("orders").select("id").or_("id.eq.1,id.eq.4"), id="or"),
        pytest.param(
            lambda c: c.table("orders").select("id").filter("status", "match", "^p"),
            id="raw-operator",
        ),
        pytest.param(
            lambda c: c.table("orders").select("id").order("meta->>token"), id="json-order"
        ),
        pytest.param(
            lambda c: c.table("orders").select("id").limit("5&select=*"),  # type: ignore[arg-type]
            id="limit-text",
        ),
        pytest.param(lambda c: c.table("orders").upsert({"id": 1, "status": "x"}), id="upsert"),
        pytest.param(lambda c: c.table("orders").delete().eq("id", 1), id="delete"),
        pytest.param(lambda c: c.rpc("anything", {}), id="rpc"),
        pytest.param(lambda c: c.table("orders").select("id").single(), id="single"),
    ],
)
def test_shim_refuses_what_is_outside_the_subset(rig: Rig, build: Callable[[Client], Any]) -> None:
    client = user_client(rig, rig.jwt(USER_A))
    outside = "outside the subset|only accepts plain identifiers|reserved query name|non-negative"
    with pytest.raises(APIError, match=f"{outside}|invalid path") as refused:
        build(client).execute()
    assert refused.value.code in ("PGRST100", "PGRST102", "PGRST107", "PGRST117", "PGRST125")
    assert len(rig.shim.refused) == 1
    assert rig.shim.tables_queried() == set()  # nothing reached PostgreSQL


def test_refused_request_status_is_400(rig: Rig) -> None:
    response = httpx.get(
        f"{rig.url}/rest/v1/orders",
        params={"select": "id,profiles(email)"},
        headers={"apikey": rig.anon_key},
    )
    assert response.status_code == 400
    assert set(response.json()) == {"code", "message", "details", "hint"}
    walk = httpx.get(f"{rig.url}/auth/v1/admin/users", headers={"apikey": rig.service_key})
    assert walk.status_code == 400
    assert [s.path for s in rig.shim.refused] == ["/rest/v1/orders", "/auth/v1/admin/users"]


@pytest.mark.parametrize(
    ("token", "code"),
    [
        (mint_jwt("authenticated", sub=USER_A.id, secret="not-" + JWT_SECRET), "PGRST301"),
        (mint_jwt("authenticated", sub=USER_A.id, ttl=-60), "PGRST303"),
        (mint_jwt("postgres"), "PGRST301"),
    ],
    ids=["forged", "expired", "superuser-role"],
)
def test_bad_tokens_are_rejected_with_401(rig: Rig, token: str, code: str) -> None:
    bad_token = "JWT (could not be decoded|expired|role 'postgres' is not allowed)"
    with pytest.raises(APIError, match=bad_token) as refused:
        user_client(rig, token).table("orders").select("id").execute()
    assert refused.value.code == code
    assert [s.status for s in rig.shim.log] == [401]
    assert rig.shim.tables_queried() == set()
