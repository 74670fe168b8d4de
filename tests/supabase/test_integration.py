"""The Supabase connector end to end: agent -> real supabase-py client -> HTTP -> the shim ->
PostgreSQL with Supabase's roles and row level security (see rig/).

Every test here also fails if the connector sent anything the strict shim does not understand
(``rig.shim.refused``): the real PostgREST might have read it differently.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pandas as pd
import pytest
from supabase import ClientOptions, acreate_client, create_client

from loom_nb import define_agent
from loom_nb._context import RunContext
from loom_nb.models.testing import ReplayModel, Reply
from tests.supabase.rig import USER_A, USER_B, Rig

supabase_module = pytest.importorskip("loom_nb.supabase")
supabase_tools = supabase_module.supabase_tools

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

TABLES = {
    "orders": {
        "description": "Customer orders",
        "columns": ["id", "status", "total", "created_at"],
    },
    "products": {"columns": ["id", "name", "price"]},
    "tickets": {"description": "Support tickets", "write": True},
}


@pytest.fixture(autouse=True)
def _strict_shim(rig: Rig) -> Iterator[None]:
    yield
    refused = [(s.method, s.path, s.query, s.error) for s in rig.shim.refused]
    assert refused == [], "the connector sent requests outside the PostgREST subset"


def sync_factory(rig: Rig, calls: list[RunContext] | None = None) -> Callable[[RunContext], Any]:
    def factory(ctx: RunContext) -> Any:
        if calls is not None:
            calls.append(ctx)
        return create_client(
            rig.url,
            rig.anon_key,
            options=ClientOptions(headers={"Authorization": f"Bearer {ctx['jwt']}"}),
        )

    return factory


def agent_for(
    rig: Rig,
    replies: list[Reply | str],
    *,
    factory: Callable[..., Any] | None = None,
    max_steps: int = 20,
    **options: Any,
) -> Any:
    connector = supabase_tools(client=factory or sync_factory(rig), tables=TABLES, **options)
    return define_agent(
        name="analyst", model=ReplayModel(replies), connectors=[connector], max_steps=max_steps
    )


def call(tool: str, **arguments: Any) -> Reply:
    return Reply(tool_calls=[(f"supabase_{tool}", arguments)])


def results(result: Any) -> list[Any]:
    return [r for m in result.new_messages for r in m.tool_results]


def superuser_rows(rig: Rig, query: str) -> list[tuple[Any, ...]]:
    with rig.superuser() as conn:
        return conn.execute(query).fetchall()


def ctx(user: Any, rig: Rig) -> dict[str, str]:
    return {"jwt": rig.jwt(user)}


# ---- reading ------------------------------------------------------------------------------------


def test_each_users_agent_sees_only_that_users_rows(rig: Rig) -> None:
    select = call("select", table="orders", order=[{"column": "id"}])
    agent = agent_for(rig, [select, "Ada's orders.", select, "Bob's orders."])

    ada = agent.run_sync("My orders?", context=ctx(USER_A, rig))
    bob = agent.run_sync("My orders?", context=ctx(USER_B, rig))

    assert ada.status == bob.status == "complete"
    frame_a, frame_b = ada.frames[0], bob.frames[0]
    assert list(frame_a.columns) == ["id", "status", "total", "created_at"]  # no user_id, no meta
    assert frame_a["id"].tolist() == [1, 2, 3]
    assert frame_a["status"].tolist() == ["paid", "shipped", "new"]
    assert frame_a["total"].tolist() == [120.5, 35.0, 9.99]
    assert frame_a["created_at"].iloc[0] == pd.Timestamp("2026-01-05 10:00:00", tz="UTC")
    assert frame_b["id"].tolist() == [4, 5]
    assert frame_b["total"].tolist() == [999.0, 42.0]
    # What the model was told is the same rows, and never the other user's.
    seen_a = results(ada)[0].content
    assert "shipped" in seen_a and "999" not in seen_a and "refunded" not in seen_a
    assert "tok-a1" not in seen_a  # meta is not an allowed column
    assert "refunded" in results(bob)[0].content and "shipped" not in results(bob)[0].content


def test_filters_order_paging_and_count_against_postgres(rig: Rig) -> None:
    agent = agent_for(
        rig,
        [
            call(
                "select",
                table="orders",
                columns=["id", "total"],
                filters=[
                    {"column": "status", "op": "in", "value": ["paid", "new", "refunded"]},
                    {"column": "total", "op": "gt", "value": 5},
                ],
                order=[{"column": "total", "desc": True}],
                limit=1,
                offset=1,
                count=True,
            ),
            call(
                "select",
                table="products",
                columns=["name"],
                filters=[
                    {"column": "name", "op": "ilike", "value": "g%"},
                    {"column": "price", "op": "lt", "value": 100, "not": True},
                ],
            ),
            "Done.",
        ],
        max_rows=10,
    )
    result = agent.run_sync("Second largest order?", context=ctx(USER_A, rig))
    page, gizmo = result.frames
    assert page.to_dict("records") == [{"id": 3, "total": 9.99}]  # A's paid/new: 120.5, 9.99
    assert "total_rows=2" in results(result)[0].content  # the exact count, RLS applied
    assert gizmo["name"].tolist() == ["Gizmo"]


def test_values_with_blanks_commas_quotes_and_parens_match_exactly(rig: Rig) -> None:
    odd = [" padded", "a,b", 'say "hi"', "x)", "(y", "back\\slash"]
    with rig.superuser() as conn, conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO tickets (user_id, subject) VALUES (%s, %s)",
            [(USER_A.id, subject) for subject in odd],
        )
    agent = agent_for(
        rig,
        [
            call(
                "select",
                table="tickets",
                columns=["subject"],
                filters=[{"column": "subject", "op": "in", "value": odd}],
            ),
            call(
                "select",
                table="tickets",
                columns=["subject"],
                filters=[{"column": "subject", "op": "in", "value": [" padded"]}],
            ),
            call(
                "select",
                table="tickets",
                columns=["subject"],
                filters=[{"column": "subject", "op": "eq", "value": 'say "hi"'}],
            ),
            "ok",
        ],
    )
    result = agent.run_sync("Find them", context=ctx(USER_A, rig))
    every, padded, quoted = (sorted(f["subject"]) for f in result.frames)
    assert every == sorted(odd)
    assert padded == [" padded"]
    assert quoted == ['say "hi"']


def test_row_cap_holds_against_the_real_server(rig: Rig) -> None:
    agent = agent_for(
        rig,
        [
            call("select", table="products", limit=1000),
            call("select", table="products"),
            "ok",
        ],
        max_rows=2,
        frame_rows=3,
    )
    result = agent.run_sync("All products", context=ctx(USER_A, rig))
    asked_for_more, capped = results(result)
    for r in (asked_for_more, capped):
        assert len(r.data) == 3  # of 4 products: a larger limit is cut to frame_rows
        # The model sees max_rows of them, and is told that more rows may match.
        assert "rows=2 " in r.content and "truncated=true" in r.content
        assert "3 rows (frame_rows=3 reached: more may match)" in r.content
    assert [dict(request.query)["limit"] for request in rig.shim.log] == ["3", "3"]


def test_client_factory_gets_the_run_context_once_per_run(rig: Rig) -> None:
    calls: list[RunContext] = []
    two_selects = Reply(
        tool_calls=[
            ("supabase_select", {"table": "orders"}),
            ("supabase_select", {"table": "products"}),
        ]
    )
    agent = agent_for(
        rig,
        [
            two_selects,
            call("select", table="tickets"),
            "done",
            call("select", table="orders"),
            "done",
        ],
        factory=sync_factory(rig, calls),
    )
    ada, bob = rig.jwt(USER_A), rig.jwt(USER_B)
    first = agent.run_sync("Look around", context={"jwt": ada})
    second = agent.run_sync("Again", context={"jwt": bob, "team": "support"})

    assert len(calls) == 2  # three selects in run one, one in run two: one client per run
    assert [c.thread_id for c in calls] == [first.thread_id, second.thread_id]
    assert [c["jwt"] for c in calls] == [ada, bob]
    assert calls[1]["team"] == "support" and calls[0].agent == "analyst"
    assert first.frames[0]["id"].tolist() == [1, 2, 3]
    assert second.frames[0]["id"].tolist() == [4, 5]  # the second run used Bob's token


def test_async_client_reads_and_writes(rig: Rig) -> None:
    async def factory(ctx: RunContext) -> Any:
        return await acreate_client(
            rig.url,
            rig.anon_key,
            options=ClientOptions(headers={"Authorization": f"Bearer {ctx['jwt']}"}),
        )

    agent = agent_for(
        rig,
        [
            call("select", table="orders", columns=["id"]),
            call("insert", table="tickets", rows=[{"subject": "Async hello"}]),
            "Filed.",
        ],
        factory=factory,
    )
    result = agent.run_sync("File a ticket", context=ctx(USER_B, rig))
    assert result.frames[0]["id"].tolist() == [4, 5]
    assert result.status == "awaiting_approval"
    done = agent.resume_sync(
        result.thread_id, {result.pending[0].call_id: True}, context=ctx(USER_B, rig)
    )
    assert done.status == "complete"
    assert superuser_rows(
        rig, "SELECT user_id::text FROM tickets WHERE subject = 'Async hello'"
    ) == [(USER_B.id,)]


# ---- writing ------------------------------------------------------------------------------------


def test_approved_insert_lands_in_postgres(rig: Rig) -> None:
    agent = agent_for(
        rig,
        [
            call(
                "insert",
                table="tickets",
                rows=[{"subject": "Broken widget", "body": "It squeaks."}],
            ),
            "Ticket filed.",
        ],
    )
    result = agent.run_sync("File a ticket", context=ctx(USER_A, rig))
    assert result.status == "awaiting_approval"
    assert rig.shim.log == []  # nothing is sent before the user decides
    pending = result.pending[0]
    assert pending.preview["table"] == "tickets"

    done = agent.resume_sync(result.thread_id, {pending.call_id: True}, context=ctx(USER_A, rig))

    assert done.status == "complete" and done.output == "Ticket filed."
    (inserted,) = results(done)
    assert inserted.approval == "approved" and not inserted.is_error
    assert inserted.data["subject"].tolist() == ["Broken widget"]
    assert superuser_rows(
        rig, "SELECT user_id::text, subject, body, status FROM tickets WHERE id = 3"
    ) == [(USER_A.id, "Broken widget", "It squeaks.", "open")]


def test_approved_update_changes_only_the_users_own_rows(rig: Rig) -> None:
    agent = agent_for(
        rig,
        [
            call(
                "update",
                table="tickets",
                values={"status": "closed"},
                filters=[{"column": "status", "op": "in", "value": ["open", "pending"]}],
            ),
            "Closed.",
        ],
    )
    result = agent.run_sync("Close all my tickets", context=ctx(USER_A, rig))
    done = agent.resume_sync(
        result.thread_id, {result.pending[0].call_id: True}, context=ctx(USER_A, rig)
    )
    assert done.status == "complete"
    assert results(done)[0].data["id"].tolist() == [1]
    assert superuser_rows(rig, "SELECT id, status FROM tickets ORDER BY id") == [
        (1, "closed"),
        (2, "pending"),
    ]  # Bob's ticket matched the filter but RLS kept it


def close_open_tickets(rig: Rig, filters: list[dict[str, Any]], reply: str = "Done.") -> Any:
    return agent_for(
        rig, [call("update", table="tickets", values={"status": "closed"}, filters=filters), reply]
    )


def test_an_update_card_counts_only_the_rows_rls_lets_the_user_see(rig: Rig) -> None:
    with rig.superuser() as conn:  # three open tickets: two of Bob's, one of Ada's
        conn.execute(
            "INSERT INTO tickets (user_id, subject, status) VALUES (%s, 'Bob again', 'open')",
            (USER_B.id,),
        )
        conn.execute("UPDATE tickets SET status = 'open' WHERE id = 2")
    agent = close_open_tickets(rig, [{"column": "status", "op": "eq", "value": "open"}])
    result = agent.run_sync("Close my open tickets", context=ctx(USER_A, rig))
    (pending,) = result.pending
    assert pending.preview["rows_matched"] == 1  # Ada's one ticket; Bob's two are hidden
    assert pending.preview["effect"].startswith("1 row matches now (shown below)")
    rows = pending.preview["rows that change"]
    assert rows[["id", "status (now)", "status (new)"]].to_dict("records") == [
        {"id": 1, "status (now)": "open", "status (new)": "closed"}
    ]
    done = agent.resume_sync(result.thread_id, {pending.call_id: True}, context=ctx(USER_A, rig))
    assert results(done)[0].data["id"].tolist() == [1]
    patch = rig.shim.log[-1]
    assert patch.method == "PATCH" and "handling=strict,max-affected=1" in patch.prefer[0]
    assert superuser_rows(rig, "SELECT id, status FROM tickets ORDER BY id") == [
        (1, "closed"),
        (2, "open"),
        (3, "open"),
    ]


def test_an_update_whose_rows_grew_after_its_card_changes_nothing_and_says_so(rig: Rig) -> None:
    agent = close_open_tickets(
        rig, [{"column": "status", "op": "eq", "value": "open"}], "They changed: ask again?"
    )
    result = agent.run_sync("Close my open tickets", context=ctx(USER_A, rig))
    (pending,) = result.pending
    assert pending.preview["rows_matched"] == 1
    with rig.superuser() as conn:  # meanwhile, a new open ticket of Ada's arrives
        conn.execute(
            "INSERT INTO tickets (user_id, subject, status) VALUES (%s, 'New one', 'open')",
            (USER_A.id,),
        )
    done = agent.resume_sync(result.thread_id, {pending.call_id: True}, context=ctx(USER_A, rig))
    assert done.status == "complete" and done.output == "They changed: ask again?"
    (outcome,) = results(done)
    assert outcome.is_error and outcome.approval == "approved"
    error = json.loads(outcome.content)["error"]
    assert error["code"] == "more_rows_than_approved"
    assert error["message"] == (
        "Nothing was updated: 2 rows match now, but the approval card showed 1."
    )
    assert (outcome.error or "").startswith(error["message"])  # what the card's outcome says
    assert superuser_rows(rig, "SELECT status, count(*) FROM tickets GROUP BY 1 ORDER BY 1") == [
        ("open", 2),
        ("pending", 1),
    ]


def test_not_in_an_empty_string_cannot_update_every_row(rig: Rig) -> None:
    """PostgREST reads ``in.()`` as the empty list, so ``not.in.()`` would match every row,
    NULLs included; the card says ``NOT (body IN (''))``, and that is what runs."""
    with rig.superuser() as conn:
        conn.execute(
            "INSERT INTO tickets (user_id, subject) VALUES (%s, 'No body')", (USER_A.id,)
        )  # body defaults to ''
    agent = close_open_tickets(rig, [{"column": "body", "op": "in", "value": [""], "not": True}])
    result = agent.run_sync("Close the tickets with a body", context=ctx(USER_A, rig))
    (pending,) = result.pending
    assert pending.preview["where"] == "NOT (body = '')"
    assert pending.preview["rows_matched"] == 1
    agent.resume_sync(result.thread_id, {pending.call_id: True}, context=ctx(USER_A, rig))
    assert superuser_rows(rig, "SELECT subject, status FROM tickets ORDER BY id") == [
        ("Where is my parcel?", "closed"),
        ("Refund please", "pending"),
        ("No body", "open"),  # its body is '': it does not match, and it is unchanged
    ]


def test_rejected_writes_do_not_land(rig: Rig) -> None:
    agent = agent_for(
        rig,
        [
            Reply(
                tool_calls=[
                    ("supabase_insert", {"table": "tickets", "rows": [{"subject": "Spam"}]}),
                    (
                        "supabase_update",
                        {
                            "table": "tickets",
                            "values": {"status": "closed"},
                            "filters": [{"column": "id", "op": "eq", "value": 1}],
                        },
                    ),
                ]
            ),
            "Nothing was changed.",
        ],
    )
    result = agent.run_sync("Tidy up", context=ctx(USER_A, rig))
    decisions = {p.call_id: False for p in result.pending}
    assert len(decisions) == 2
    done = agent.resume_sync(result.thread_id, decisions, context=ctx(USER_A, rig))

    assert done.status == "complete"
    assert all(r.approval == "rejected" and r.is_error for r in results(done))
    # the update's card counted and showed its rows (reads); nothing was written
    assert [s.method for s in rig.shim.log] == ["GET"]
    assert superuser_rows(rig, "SELECT id, subject, status FROM tickets ORDER BY id") == [
        (1, "Where is my parcel?", "open"),
        (2, "Refund please", "pending"),
    ]


def test_rls_refusal_reaches_the_model_as_an_error_and_the_run_completes(rig: Rig) -> None:
    model_replies = [
        call("insert", table="tickets", rows=[{"user_id": USER_B.id, "subject": "As Bob"}]),
        "I am not allowed to file tickets for another user.",
    ]
    agent = agent_for(rig, model_replies, approve_writes=False)
    result = agent.run_sync("File a ticket for Bob", context=ctx(USER_A, rig))

    assert result.status == "complete"
    (refusal,) = results(result)
    assert refusal.is_error
    error = json.loads(refusal.content)["error"]
    assert error["code"] == "42501"
    assert "row-level security" in error["message"]
    # The model's next turn was given exactly that error.
    last_request = agent.model.requests[-1]
    assert any(r.content == refusal.content for m in last_request.messages for r in m.tool_results)
    assert [(s.method, s.status) for s in rig.shim.log] == [("POST", 403)]
    assert superuser_rows(rig, "SELECT count(*) FROM tickets") == [(2,)]


def test_moving_a_ticket_to_another_user_is_refused_by_rls(rig: Rig) -> None:
    agent = agent_for(
        rig,
        [
            call(
                "update",
                table="tickets",
                values={"user_id": USER_B.id},
                filters=[{"column": "id", "op": "eq", "value": 1}],
            ),
            "Could not.",
        ],
        approve_writes=False,
    )
    result = agent.run_sync("Give my ticket to Bob", context=ctx(USER_A, rig))
    assert result.status == "complete"
    assert json.loads(results(result)[0].content)["error"]["code"] == "42501"
    assert superuser_rows(rig, "SELECT user_id::text FROM tickets WHERE id = 1") == [(USER_A.id,)]


# ---- hostile arguments ---------------------------------------------------------------------------

HOSTILE_SELECTS = [
    {"table": "secrets"},
    {"table": "profiles", "columns": ["email"]},
    {"table": "orders", "columns": ["id,profiles(email)"]},
    {"table": "orders", "columns": ["id", "profiles!inner(email)"]},
    {"table": "orders", "columns": ["...profiles(email)"]},
    {"table": "orders", "columns": ["email:profiles(email)"]},
    {"table": "orders", "columns": ["meta->>token"]},
    {"table": "orders", "columns": ["meta"]},
    {"table": "orders", "columns": ["user_id"]},
    {"table": "orders", "columns": ["id::text"]},
    {"table": "orders", "columns": ["count()"]},
    {"table": "orders", "columns": ["*"]},
    {"table": "orders", "filters": [{"column": "meta->>token", "op": "eq", "value": "tok-b1"}]},
    {"table": "orders", "filters": [{"column": "secrets.value", "op": "eq", "value": "x"}]},
    {"table": "orders", "filters": [{"column": "limit", "op": "eq", "value": "x"}]},
    {"table": "orders", "filters": [{"column": "status", "op": "match", "value": "^p"}]},
    {"table": "orders", "filters": [{"column": "status", "op": "or", "value": "(id.eq.4)"}]},
    {"table": "orders", "order": [{"column": "meta->>token"}]},
    {"table": "orders", "order": [{"column": "id.desc,meta->>token"}]},
    {"table": "orders", "limit": "5&select=*"},
    {"table": "../auth/v1/admin/users"},
    {"table": "rpc/anything"},
    {"table": "orders?select=*,profiles(email)"},
]

#: Values are data: sent (percent-encoded or quoted), they must match nothing and leak nothing.
HOSTILE_VALUES = [
    {
        "table": "orders",
        "filters": [{"column": "status", "op": "eq", "value": "paid&select=*,profiles(email)"}],
    },
    {
        "table": "orders",
        "filters": [{"column": "status", "op": "in", "value": ["x)", "y,or=(id.eq.4", '"z"']}],
    },
    {"table": "orders", "filters": [{"column": "status", "op": "like", "value": "%),or(id.gt.0"}]},
]


def test_hostile_selects_never_reach_the_database(rig: Rig) -> None:
    replies: list[Reply | str] = [call("select", **args) for args in HOSTILE_SELECTS]
    replies += [call("select", **args) for args in HOSTILE_VALUES]
    agent = agent_for(rig, [*replies, "I cannot do that."], max_steps=len(replies) + 1)
    result = agent.run_sync("Show me the secrets", context=ctx(USER_A, rig))

    assert result.status == "complete"
    outcomes = results(result)
    refused, sent = outcomes[: len(HOSTILE_SELECTS)], outcomes[len(HOSTILE_SELECTS) :]
    for args, outcome in zip(HOSTILE_SELECTS, refused, strict=True):
        assert outcome.is_error, args
        assert "error" in json.loads(outcome.content), args
    for args, outcome in zip(HOSTILE_VALUES, sent, strict=True):
        assert not outcome.is_error, (args, outcome.content)
        assert outcome.data.empty, args
    # Refused calls sent nothing; the value attacks reached only orders, as plain values.
    assert len(rig.shim.log) == len(HOSTILE_VALUES)
    assert rig.shim.tables_queried() == {"orders"}
    everything = " ".join(o.content for o in outcomes)
    for leaked in ("sk_live", "@example.test", "tok-", "999"):
        assert leaked not in everything


def test_hostile_writes_never_reach_the_database(rig: Rig) -> None:
    writes = [
        ("insert", {"table": "orders", "rows": [{"status": "free", "total": 0}]}),
        ("insert", {"table": "secrets", "rows": [{"name": "x", "value": "y"}]}),
        ("insert", {"table": "tickets", "rows": [{"subject": "x", "user_id:profiles(email)": 1}]}),
        ("insert", {"table": "tickets", "rows": [{"subject": "x", "limit": 1}]}),
        ("update", {"table": "tickets", "values": {"status": "closed"}}),
        ("update", {"table": "tickets", "values": {"status": "closed"}, "filters": []}),
        (
            "update",
            {
                "table": "orders",
                "values": {"total": 0},
                "filters": [{"column": "id", "op": "eq", "value": 1}],
            },
        ),
        (
            "update",
            {
                "table": "tickets",
                "values": {"status": "closed"},
                "filters": [{"column": "secrets.value", "op": "eq", "value": "x"}],
            },
        ),
    ]
    agent = agent_for(
        rig, [*(call(tool, **args) for tool, args in writes), "No."], max_steps=len(writes) + 1
    )
    result = agent.run_sync("Give everything away", context=ctx(USER_A, rig))

    assert result.status == "complete"  # invalid writes fail at once, no approval is asked
    assert all(r.is_error and "error" in json.loads(r.content) for r in results(result))
    assert len(results(result)) == len(writes)
    assert rig.shim.log == []
    assert superuser_rows(rig, "SELECT count(*) FROM orders WHERE total = 0") == [(0,)]
    assert superuser_rows(rig, "SELECT count(*) FROM tickets WHERE status = 'closed'") == [(0,)]


# ---- errors keep the allowlist ------------------------------------------------------------------

#: accounts has no row level security; tickets has it. Each allowlist hides a column.
HIDDEN = {
    "accounts": {"columns": ["id", "label", "plan"], "write": True},
    "tickets": {"columns": ["id", "subject", "status"], "write": True},
}
#: Values of the hidden columns (seed.sql), and tickets' hidden owner.
SECRETS = ("ak_live_HIDDEN_COLUMN", "Order 2 has not arrived", "Order 5 was broken", USER_A.id)


def run_approved(rig: Rig, key: str, table: str, values: dict[str, Any], row: int = 1) -> Any:
    """An update of one row, approved: its result and the agent whose model saw it."""
    connector = supabase_tools(
        client=lambda ctx: create_client(
            rig.url, rig.anon_key, options=ClientOptions(headers={"Authorization": f"Bearer {key}"})
        ),
        tables=HIDDEN,
    )
    update = call(
        "update", table=table, values=values, filters=[{"column": "id", "op": "eq", "value": row}]
    )
    agent = define_agent(
        name="a", model=ReplayModel([update, "Could not."]), connectors=[connector]
    )
    asked = agent.run_sync("Change it")
    assert asked.status == "awaiting_approval", asked.error
    done = agent.resume_sync(asked.thread_id, {asked.pending[0].call_id: True})
    assert done.status == "complete"
    [outcome] = results(done)
    return outcome, agent, done


def seen_by_the_model_and_kept(agent: Any, done: Any) -> str:
    """Everything the model was sent, and the thread as saved."""
    sent = [m.to_dict() for request in agent.model.requests for m in request.messages]
    kept = [m.to_dict() for m in agent.thread(done.thread_id).messages]
    return json.dumps([sent, kept], default=str)


@pytest.mark.parametrize(
    "table, values, code",
    [
        ("accounts", {"label": None}, "23502"),  # NOT NULL
        ("accounts", {"plan": "gold"}, "23514"),  # CHECK
        ("accounts", {"label": "x" * 30}, "23514"),
        ("tickets", {"subject": None}, "23502"),
        ("tickets", {"status": "bogus"}, "23514"),
    ],
)
@pytest.mark.parametrize("role", ["user", "service_role"])
def test_a_violated_constraint_shows_the_model_no_value_of_a_hidden_column(
    rig: Rig, table: str, values: dict[str, Any], code: str, role: str
) -> None:
    """PostgreSQL's detail is "Failing row contains (...)" with every column the role may
    select, when row level security does not apply (accounts; tickets for the service role,
    which bypasses it): it is left out, and said to be."""
    key = rig.jwt(USER_A) if role == "user" else rig.service_key
    with rig.superuser() as conn:  # what PostgreSQL itself says, through the real shim
        before = conn.execute(f"SELECT * FROM {table} ORDER BY id").fetchall()
    outcome, agent, done = run_approved(rig, key, table, values)
    assert outcome.is_error and outcome.approval == "approved"
    error = json.loads(outcome.content)["error"]
    assert error["code"] == code, error
    [logged] = [s for s in rig.shim.log if s.method == "PATCH"]
    assert logged.status == 400
    said = seen_by_the_model_and_kept(agent, done)
    assert not [s for s in SECRETS if s in said], said
    if table == "accounts" or role == "service_role":
        said_by_postgres = (logged.error or {}).get("details") or ""
        assert said_by_postgres.startswith("Failing row contains ("), logged.error
        assert any(s in said_by_postgres for s in SECRETS)  # what the model must not see
        assert error["details_left_out"].startswith("PostgreSQL's details were left out")
    with rig.superuser() as conn:
        assert conn.execute(f"SELECT * FROM {table} ORDER BY id").fetchall() == before


def test_a_key_of_allowed_columns_reaches_the_model_in_a_data_block(rig: Rig) -> None:
    outcome, agent, done = run_approved(rig, rig.jwt(USER_A), "accounts", {"label": "globex"})
    error = json.loads(outcome.content)["error"]
    assert error["code"] == "23505" and "details_left_out" not in error
    assert "Key (label)=(globex) already exists." in error["details"]
    assert error["details"].index("<data-") < error["details"].index("Key (label)")
    assert "ak_live" not in seen_by_the_model_and_kept(agent, done)
