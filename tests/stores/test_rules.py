"""Rules bound to effects (``agent.allow`` / ``agent.deny``), on every store: kept, listed and
revoked in the store, and a call approved by itself only when its effect is inside a rule.
The DataFrame connector is the real one; its frames change only when a call ran."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loom_nb import ReplayModel, Reply, Store, Thread, UserError, define_agent, memory_store, tool
from loom_nb._rules import KERNEL, Effect, Rule, new_rule_id
from loom_nb.frames import frame_tools


def tickets() -> pd.DataFrame:
    return pd.DataFrame(
        {"id": [1, 2, 3], "status": ["open", "open", "closed"], "owner": ["a", "b", "c"]}
    )


def append(rows: int, start: int = 100, **columns: Any) -> Reply:
    row = {"status": "open", **columns}
    return Reply(
        "",
        [
            (
                "frames_append",
                {"table": "tickets", "rows": [{"id": start + i, **row} for i in range(rows)]},
            )
        ],
    )


def agent_on(store: Store, frame: pd.DataFrame, replies: list[Any], **kwargs: Any) -> Any:
    data = frame_tools(
        {
            "tickets": {"frame": frame, "write": True},
            "notes": {"frame": frame.copy(), "write": True},
        }
    )
    return define_agent(
        name="cleaner", model=ReplayModel(replies), connectors=[data], store=store, **kwargs
    )


def results(result: Any) -> list[Any]:
    return [r for m in result.new_messages for r in m.tool_results]


# ---- the store's part ------------------------------------------------------------------------


def rule(agent: str = "cleaner", **fields: Any) -> Rule:
    return Rule(id=new_rule_id(), kind="allow", agent=agent, tool="frames_append", **fields)


def test_a_rule_is_kept_listed_and_revoked_once(store: Store):
    kept = rule(table="tickets", columns=("id", "status"), max_rows=20, thread_id="t1")
    store.save_rule(kept)  # type: ignore[attr-defined]
    store.save_rule(rule(agent="other"))  # type: ignore[attr-defined]
    (found,) = store.load_rules("cleaner")  # type: ignore[attr-defined]
    assert found.to_dict() == kept.to_dict()
    assert found.revoke() is True
    assert found.revoke() is False  # compare-and-set: once
    assert store.load_rules("cleaner") == []  # type: ignore[attr-defined]


def test_rules_are_the_users_own(store: Store):
    store.save_rule(rule(user_id="ann"))  # type: ignore[attr-defined]
    assert store.load_rules("cleaner") == []  # type: ignore[attr-defined]
    assert store.load_rules("cleaner", user_id="bob") == []  # type: ignore[attr-defined]
    (mine,) = store.load_rules("cleaner", user_id="ann")  # type: ignore[attr-defined]
    assert store.revoke_rule(mine.id, user_id="bob") is False  # type: ignore[attr-defined]
    assert store.revoke_rule(mine.id, user_id="ann") is True  # type: ignore[attr-defined]


def test_rules_outlive_the_store_object(persistent_backend: Any):
    backend = persistent_backend
    first = backend.open()
    first.save_rule(rule(thread_id="t1"))
    first.close()
    again = backend.open()
    assert [r.thread_id for r in again.load_rules("cleaner")] == ["t1"]
    again.close()


# ---- the agent's part ------------------------------------------------------------------------


def test_thirty_appends_under_one_rule_and_one_outside_it_waits(store: Store):
    frame = tickets()
    replies = [append(1)] + [append(1, start=200 + i) for i in range(30)] + [append(21), "Done."]
    agent = agent_on(store, frame, replies, max_steps=40)
    first = agent.run_sync("clean up")
    assert first.status == "awaiting_approval"  # no rule yet: the card waits
    made = agent.allow(
        tool="frames_append",
        table="tickets",
        max_rows=20,
        scope="thread",
        thread_id=first.thread_id,
    )
    resumed = agent.resume_sync(first.thread_id, {first.pending[0].call_id: True})
    ran = results(resumed)
    assert [r.approval for r in ran] == ["approved"] + ["rule"] * 30
    assert {r.rule for r in ran[1:]} == {made.id}
    assert len(frame) == 3 + 31
    # 21 rows is outside max_rows=20: it waits, as today, and nothing of it is written
    assert resumed.status == "awaiting_approval"
    (waiting,) = resumed.pending
    assert waiting.tool == "frames_append" and waiting.state == "pending" and waiting.rule is None
    # saved as if clicked: a new store object reads the same results, rule ids and all
    again = store.load(first.thread_id)
    assert again is not None
    saved = [r for m in again.messages for r in m.tool_results]
    assert [r.rule for r in saved].count(made.id) == 30


def test_a_rule_is_bound_to_table_columns_and_thread(store: Store):
    frame = tickets()
    replies = [
        append(1),
        Reply(
            "",
            [
                (
                    "frames_append",
                    {"table": "notes", "rows": [{"id": 9, "status": "x", "owner": "z"}]},
                )
            ],
        ),
    ]
    agent = agent_on(store, frame, [*replies, append(1, owner="z"), append(1), append(1), "Done."])
    first = agent.run_sync("start")
    tid = first.thread_id
    agent.allow(tool="frames_append", table="tickets", columns=["id", "status"], thread_id=tid)
    other = agent.run_sync(
        "another thread"
    )  # the notes append: not the rule's table, not its thread
    assert other.status == "awaiting_approval"
    again = agent.resume_sync(tid, {first.pending[0].call_id: True})
    # owner is not among the rule's columns: it waits
    assert again.status == "awaiting_approval"
    assert again.pending[0].arguments["rows"][0]["owner"] == "z"
    assert agent.rules(thread_id=tid)[0].columns == ("id", "status")
    assert agent.rules(thread_id=other.thread_id) == []


def test_an_update_is_bounded_by_its_cards_count(store: Store):
    frame = tickets()
    update = {
        "table": "tickets",
        "values": {"status": "done"},
        "filters": [{"column": "status", "op": "eq", "value": "open"}],
    }
    agent = agent_on(
        store,
        frame,
        [
            append(1),
            Reply("", [("frames_update", update)]),
            Reply("", [("frames_update", update)]),
            "Done.",
        ],
    )
    first = agent.run_sync("start")
    tid = first.thread_id
    agent.allow(tool="frames_update", table="tickets", max_rows=1, thread_id=tid)
    waits = agent.resume_sync(tid, {first.pending[0].call_id: True})
    assert waits.status == "awaiting_approval"  # its card counts 3 open rows (with the append)
    assert waits.pending[0].preview["rows_matched"] == 3
    agent.allow(
        tool="frames_update", table="tickets", max_rows=3, where="status = *", thread_id=tid
    )
    agent.resume_sync(tid, {waits.pending[0].call_id: False})
    assert (frame.status == "done").sum() == 3  # the second update: 3 rows, inside the new rule


def test_a_rule_approved_call_that_waits_is_held_to_its_card_at_execution(store: Store):
    frame = tickets()
    update = {
        "table": "tickets",
        "values": {"status": "done"},
        "filters": [{"column": "status", "op": "eq", "value": "open"}],
    }
    turn = Reply("", [("frames_update", update), ("ask_user", {"question": "Sure?"})])
    agent = agent_on(store, frame, [append(1), turn, "Done."])
    first = agent.run_sync("start")
    agent.allow(tool="frames_update", table="tickets", max_rows=3, thread_id=first.thread_id)
    asked = agent.resume_sync(first.thread_id, {first.pending[0].call_id: True})
    update_call, question = asked.pending
    assert (update_call.state, update_call.rule) == ("approved", agent.rules()[0].id)
    frame.loc[len(frame)] = [500, "open", "x"]  # now 4 rows match, more than its card showed
    done = agent.resume_sync(asked.thread_id, {question.call_id: "yes"})
    (ran,) = [r for r in results(done) if r.name == "frames_update"]
    assert ran.approval == "rule" and ran.is_error and "Nothing was updated" in ran.content
    assert (frame.status == "done").sum() == 0


def test_a_deny_rule_rejects_and_wins_over_an_allow(store: Store):
    frame = tickets()
    agent = agent_on(store, frame, [append(1), append(1), "Done."])
    first = agent.run_sync("start")
    agent.allow(tool="frames_append", thread_id=first.thread_id)
    no = agent.deny(tool="frames_append", table="tickets", thread_id=first.thread_id)
    done = agent.resume_sync(first.thread_id, {first.pending[0].call_id: False})
    (denied,) = results(done)[1:]
    assert (denied.approval, denied.rule) == ("rejected", no.id)
    assert len(frame) == 3 and done.status == "complete"


def test_revoking_stops_the_next_automatic_decision(store: Store):
    frame = tickets()
    agent = agent_on(store, frame, [append(1), append(1), append(1), "Done."])
    first = agent.run_sync("start")
    made = agent.allow(tool="frames_append", table="tickets", thread_id=first.thread_id)
    twin = agent_on(store, frame, ["unused"])  # another agent object on the same store
    (seen,) = twin.rules()
    assert seen.id == made.id and seen.revoke() is True
    waits = agent.resume_sync(first.thread_id, {first.pending[0].call_id: True})
    assert waits.status == "awaiting_approval" and agent.rules() == []


def test_scopes_agent_and_until(store: Store):
    frame = tickets()
    agent = agent_on(store, frame, [append(1), append(1), "Done."])
    here = agent.allow(tool="frames_append", scope="agent")
    assert here.kernel == KERNEL and agent.rules() == [here]
    done = agent.run_sync("any thread")
    assert done.status == "complete" and len(frame) == 5
    here.revoke()
    soon = agent.allow(tool="frames_append", scope="until", until=timedelta(hours=1))
    assert soon.until is not None and agent.rules() == [soon]
    # a rule of scope "agent" made in another kernel decides nothing here
    foreign = Rule(
        id=new_rule_id(),
        kind="allow",
        agent="cleaner",
        tool="frames_append",
        scope="agent",
        kernel="elsewhere",
    )
    store.save_rule(foreign)  # type: ignore[attr-defined]
    assert foreign.id not in [r.id for r in agent.rules()]


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [
        ({"tool": "frames_select"}, "never waits for approval"),
        ({"tool": "nope"}, "not a tool"),
        ({"tool": "ask_user"}, "only you answer it"),
        ({"tool": "frames_append"}, "scope='thread' needs the thread"),
        ({"tool": "frames_append", "scope": "agent", "thread_id": "x"}, "goes with scope='thread'"),
        ({"tool": "frames_append", "scope": "everywhere"}, "choose one of"),
        ({"tool": "frames_append", "scope": "until"}, "needs until="),
        ({"tool": "frames_append", "scope": "agent", "max_rows": -1}, "0 or more"),
        ({"tool": "frames_append", "scope": "agent", "max_rows": True}, "whole number"),
        ({"tool": "frames_append", "scope": "agent", "columns": "id"}, "list of column names"),
        ({"tool": "frames_append", "scope": "agent", "until": -5}, "past already"),
        ({"tool": "frames_append", "thread_id": "no-such-thread"}, "no thread"),
        ({"tool": "frames_append", "scope": "until", "until": float("nan")}, "until=nan is no"),
        ({"tool": "frames_append", "scope": "until", "until": float("inf")}, "finite number"),
        ({"tool": "frames_append", "scope": "until", "until": float("-inf")}, "no moment"),
        ({"tool": "frames_append", "scope": "until", "until": 1e20}, "up to the year 9999"),
        ({"tool": "frames_append", "scope": "until", "until": timedelta.max}, "no moment"),
        (
            {"tool": "frames_append", "scope": "agent", "table": "tikets"},
            r"frames_append writes no table 'tikets'; its tables: \['notes', 'tickets'\]",
        ),
        ({"tool": "frames_update", "scope": "agent", "where": 'status = "open"'}, "single quotes"),
        ({"tool": "frames_update", "scope": "agent", "where": "*open*"}, "does not read"),
        ({"tool": "frames_update", "scope": "agent", "where": "status = open"}, "does not read"),
        ({"tool": "frames_update", "scope": "agent", "where": ""}, "does not read"),
    ],
)
def test_a_rule_written_wrong_says_how_to_write_it(kwargs: dict[str, Any], said: str):
    agent = agent_on(memory_store(), tickets(), ["x"])
    with pytest.raises(UserError, match=said):
        agent.allow(**kwargs)


def test_a_deny_on_a_table_or_column_its_tool_cannot_write_is_refused():
    # a deny that could never apply would silently reject nothing
    agent = agent_on(memory_store(), tickets(), ["x"])
    with pytest.raises(UserError, match=r"writes no table 'tikets'; its tables: \['notes', "):
        agent.deny(tool="frames_append", table="tikets", scope="agent")
    listed = frame_tools(
        {"tickets": {"frame": tickets(), "write": True, "columns": ["id", "status"]}}
    )
    strict = define_agent(
        name="c", model=ReplayModel(["x"]), connectors=[listed], store=memory_store()
    )
    for tool_name in ("frames_append", "frames_update"):
        with pytest.raises(UserError, match=r"writes no column 'owner'; its columns: \['id', "):
            strict.deny(tool=tool_name, columns=["status", "owner"], scope="agent")
    assert strict.deny(tool="frames_update", columns=["status"], scope="agent").columns == (
        "status",
    )
    assert strict.rules() != []


def test_a_tool_that_names_no_table_takes_no_table_bound():
    @tool(needs_approval=True)
    def refund(invoice: str) -> str:
        "Refund an invoice."
        return "refunded"

    agent = define_agent(name="a", model=ReplayModel(["x"]), tools=[refund], store=memory_store())
    with pytest.raises(UserError, match="does not say which table"):
        agent.allow(tool="refund", table="invoices", scope="agent")
    assert agent.allow(tool="refund", scope="agent").table is None


# ---- the property: auto-approved iff inside a rule -------------------------------------------

_names = st.sampled_from(["tickets", "notes", "orders"])
_columns = st.frozensets(st.sampled_from(["id", "status", "owner"]), min_size=1)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    bounds=st.lists(
        st.tuples(
            st.sampled_from(["frames_append", "frames_update"]),
            st.none() | _names,
            st.none() | _columns,
            st.none() | st.integers(0, 30),
        ),
        max_size=4,
    ),
    call=st.tuples(
        st.sampled_from(["frames_append", "frames_update"]),
        _names,
        _columns,
        st.none() | st.integers(0, 40),
    ),
)
def test_a_call_is_decided_by_a_rule_exactly_when_its_effect_is_inside_one(bounds, call):
    from loom_nb._rules import deciding_rule

    rules = [
        Rule(
            id=f"r{i}",
            kind="allow",
            agent="a",
            tool=t,
            table=tb,
            columns=tuple(sorted(c)) if c else None,
            max_rows=m,
            thread_id="t",
        )
        for i, (t, tb, c, m) in enumerate(bounds)
    ]
    tool_name, table, columns, rows = call
    effect = Effect(tool_name, table, columns, rows)
    inside = any(
        t == tool_name
        and (tb is None or tb == table)
        and (c is None or columns <= c)
        and (m is None or (rows is not None and rows <= m))
        for t, tb, c, m in bounds
    )
    assert (deciding_rule(rules, "t", effect) is not None) == inside
    assert deciding_rule(rules, "another thread", effect) is None


def test_a_thread_record_saved_again_keeps_its_rules(store: Store):
    store.save_thread(Thread(id="t1", agent="cleaner"))
    store.save_rule(rule(thread_id="t1"))  # type: ignore[attr-defined]
    store.save_thread(Thread(id="t1", agent="cleaner", title="renamed"))
    assert len(store.load_rules("cleaner")) == 1  # type: ignore[attr-defined]


# ---- hostile arguments under a permissive-looking rule ----------------------------------------

HOSTILE_CALLS = [
    {"table": "TICKETS", "rows": [{"id": 1, "status": "x"}]},
    {"table": "tickets ", "rows": [{"id": 1, "status": "x"}]},
    {"table": "t\u0456ckets", "rows": [{"id": 1, "status": "x"}]},  # a Cyrillic i
    {"table": "tickets; DROP TABLE tickets", "rows": [{"id": 1, "status": "x"}]},
    {"table": "notes", "rows": [{"id": 1, "status": "x"}]},
    {"table": "tickets", "rows": [{"id": i, "status": "x"} for i in range(6)]},  # over 5 rows
    {"table": "tickets", "rows": [{"id": 1, "status": "x", "owner": "z"}]},  # a column outside
    {"table": "tickets", "rows": [{"id": 1, "status": "x", "__class__": "x"}]},
    {"table": "tickets", "rows": [{"id": {"$gt": 0}, "status": "x"}]},
    {"table": "tickets", "rows": []},
    {"table": ["tickets"], "rows": [{"id": 1, "status": "x"}]},
    {"rows": [{"id": 1, "status": "x"}]},
]


@pytest.mark.parametrize("arguments", HOSTILE_CALLS)
def test_no_hostile_call_outside_a_permissive_rule_is_approved_by_it(arguments: dict[str, Any]):
    frame = tickets()
    agent = agent_on(memory_store(), frame, [Reply("", [("frames_append", arguments)]), "Done."])
    agent.allow(
        tool="frames_append", table="tickets", columns=["id", "status"], max_rows=5, scope="agent"
    )
    result = agent.run_sync("append")
    assert all(r.approval != "rule" for r in results(result))
    assert len(frame) == 3  # nothing was written by the rule
    for p in result.pending:
        assert p.state == "pending" and p.rule is None  # outside the rule: waits for a person


# ---- where=: a filter compared condition by condition, never as text ---------------------------

# Values an update's filter may hold: each makes the card's text begin like the rule's, so a
# text pattern (fnmatch) let ``status = 'open'*`` approve them (the first five did, before).
HOSTILE_VALUES = [
    "open' x",
    "open'",
    "open' AND owner = 'a",
    "open'' OR 'a' = 'a",
    "open'\\",
    "open\\' x",
    "open*",
    "open' AND\nid > 0",
    "open\u202e",
    "OPEN",
    "open ",
]


def update_on(value: Any, *more: dict[str, Any]) -> Reply:
    filters = [{"column": "status", "op": "eq", "value": value}, *more]
    return Reply(
        "",
        [("frames_update", {"table": "tickets", "values": {"owner": "z"}, "filters": filters})],
    )


@pytest.mark.parametrize("value", HOSTILE_VALUES)
def test_a_where_rule_never_approves_a_value_that_only_begins_like_its_own(value: str):
    import fnmatch

    from loom_nb._tables.filter_text import where_text
    from loom_nb._tables.grammar import Filter

    frame = pd.DataFrame({"id": [1, 2], "status": ["open", value], "owner": ["a", "b"]})
    agent = agent_on(memory_store(), frame, [update_on(value), "Done."])
    made = agent.allow(
        tool="frames_update", table="tickets", where="status = 'open'*", scope="agent"
    )
    shown = where_text([Filter("status", "eq", value)])
    if HOSTILE_VALUES.index(value) < 5:  # what the text pattern let through
        assert fnmatch.fnmatchcase(shown, made.where or "")
    result = agent.run_sync("update")
    assert result.status == "awaiting_approval" and results(result) == []
    (waiting,) = result.pending
    assert (waiting.state, waiting.rule) == ("pending", None)
    assert list(frame.owner) == ["a", "b"]  # nothing changed by the rule


@pytest.mark.parametrize(
    ("pattern", "filters"),
    [
        ("status = 'open'", []),
        ("status = 'open'*", []),
        ("status = 'open'*", [{"column": "id", "op": "gt", "value": 0}]),
        ("status = 'open' AND *", [{"column": "owner", "op": "in", "value": ["a", "b", "o'x"]}]),
        ("status = 'open' and id > 0.0", [{"column": "id", "op": "gt", "value": 0}]),
        ("status = *", []),
        ("*", [{"column": "id", "op": "is_null", "not": True}]),
    ],
)
def test_a_where_rule_approves_its_filter_and_narrower_ones(
    pattern: str, filters: list[dict[str, Any]]
):
    frame = tickets()
    agent = agent_on(memory_store(), frame, [update_on("open", *filters), "Done."])
    made = agent.allow(tool="frames_update", table="tickets", where=pattern, scope="agent")
    result = agent.run_sync("update")
    assert [(r.approval, r.rule) for r in results(result)] == [("rule", made.id)]
    assert list(frame.owner) == ["z", "z", "c"]


@pytest.mark.parametrize("value", HOSTILE_VALUES)
def test_a_where_rule_that_names_a_hostile_value_approves_that_value_only(value: str):
    from loom_nb._filter_match import filter_inside
    from loom_nb._tables.filter_text import where_text
    from loom_nb._tables.grammar import Filter

    shown = where_text([Filter("status", "eq", value)])  # the rule written as the card shows it
    assert filter_inside(shown, shown)
    assert filter_inside(f"{shown} AND id = 1", f"{shown}*")
    for other in [*HOSTILE_VALUES, "open"]:
        if other != value:
            assert not filter_inside(where_text([Filter("status", "eq", other)]), f"{shown}*")


@pytest.mark.parametrize(
    ("where", "pattern", "inside"),
    [
        ("status = 'open' AND id > 0", "status = 'open'", False),  # no * lets more in
        ("id > 0 AND status = 'open'", "status = 'open'*", True),  # ANDed: any order
        ("NOT (status = 'open')", "status = 'open'*", False),
        ("status != 'open'", "status = 'open'*", False),
        ("status IN ('open', 'closed')", "status = 'open'*", False),
        ("status IN ('open', 'closed')", "status IN ('open', *)", True),
        ("status LIKE 'open%'", "status = 'open'*", False),
        ("status = 'open' AND status = 'x'", "status = *", True),  # narrower still
        ("status = 'open'", "status = 'open' AND owner = 'a'", False),
        ("id = 1", "id = '1'", False),  # a number is no text
        ("id = 1.0", "id = 1", True),
        ("flag = TRUE", "flag = 1", False),
        ("status = E'a\\nb'", "status = 'a\nb'", True),  # one value, either spelling
        ("status = E'a\\'' x'", "status = 'a'*", False),
        ("status IS NOT NULL", "NOT (status IS NULL)", True),
        ("status IS NULL", "status = *", False),
        ("status = 'open' OR 1 = 1", "status = 'open'*", False),  # not a filter at all
        ("status = 'open'; DROP TABLE t", "status = 'open'*", False),
        ("status = 'open' *", "status = 'open'*", False),  # a call's words hold no *
        ("", "*", False),
        ("größe = 'x' AND id = 1", "größe = 'x'*", True),  # a column named in any script
    ],
)
def test_filters_compare_as_conditions(where: str, pattern: str, inside: bool):
    from loom_nb._filter_match import filter_inside

    assert filter_inside(where, pattern) is inside
    assert rule(where=pattern).covers(Effect("frames_append", "t", None, 1, where)) is inside


_hostile_text = st.text(alphabet="o'pen *AND\\\n\"%_()=,E\u202e", max_size=8)
_filters = st.builds(
    lambda column, op, value, negate: (column, op, value, negate),
    st.sampled_from(["status", "owner", "id"]),
    st.sampled_from(["eq", "neq", "like", "in", "is_null"]),
    _hostile_text | st.integers(-3, 3),
    st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(wanted=st.lists(_filters, min_size=1, max_size=3), found=st.lists(_filters, max_size=4))
def test_a_filter_is_inside_a_pattern_exactly_when_its_conditions_are(wanted, found):
    from loom_nb._filter_match import filter_inside
    from loom_nb._tables.filter_text import where_text
    from loom_nb._tables.grammar import Filter

    def made(raw: tuple[str, str, Any, bool]) -> Filter:
        column, op, value, negate = raw
        if op == "is_null":
            return Filter(column, op, None, negate)
        return Filter(column, op, (value, value) if op == "in" else value, negate)

    rule_filters, call_filters = [made(f) for f in wanted], [made(f) for f in found + wanted[:1]]
    pattern, where = where_text(rule_filters), where_text(call_filters)
    narrower = set(rule_filters) <= set(call_filters)
    assert filter_inside(where, pattern + "*") is narrower
    assert filter_inside(where, pattern + " AND *") is narrower
    assert filter_inside(where, pattern) is (set(rule_filters) == set(call_filters))
    # the attack: a call's own words cut anywhere, then *, approve it only when the cut
    # leaves the * where a value goes (then it is that whole value), never inside one; a
    # bare * (cut 0) is the rule for any filter at all
    for one in call_filters:
        text = where_text([one])
        for cut in range(1, len(text)):
            if filter_inside(text, text[:cut] + "*"):
                assert text[:cut].rstrip().endswith(("=", "LIKE")), text[:cut]
