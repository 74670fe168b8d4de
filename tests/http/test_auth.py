"""Who may read and decide: the agent's ``auth`` scopes every endpoint; another user's thread
answers exactly as a missing one; without auth only an exact 128-bit id reads a thread and
nothing lists threads; malformed requests get a 4xx JSON error saying what was wrong."""

from __future__ import annotations

import pytest

from loom_nb._messages import new_thread_id
from tests.http.conftest import Served, validate

pytestmark = pytest.mark.slow

ALICE = {"user": "alice"}


def same(a, b) -> None:
    """Two answers a client cannot tell apart: status, body bytes and headers."""
    assert (a.status_code, a.content) == (b.status_code, b.content)
    drop = {"date"}
    assert {k: v for k, v in a.headers.items() if k not in drop} == {
        k: v for k, v in b.headers.items() if k not in drop
    }


def test_another_users_threads_cannot_be_loaded_listed_searched_or_decided(served: Served):
    table = served.team.run_sync("table secret-apple", context=ALICE).thread_id
    served.team.run_sync("table", context=ALICE, thread_id=table)
    waiting = served.team.run_sync("write secret-apple", context=ALICE)
    [card] = waiting.pending
    missing = new_thread_id()
    for thread_id in (table, waiting.thread_id):
        foreign = served.get("/api/agents/team", "bob", threadId=thread_id)
        # an id never saved: what bob sees must not say the other exists
        absent = served.get("/api/agents/team", "bob", threadId=missing)
        assert foreign.status_code == 404
        validate(foreign.json(), "error")
        assert foreign.content == absent.content
        same(foreign, served.get("/api/agents/team", "carol", threadId=thread_id))
    [call_id] = [
        c.id for m in served.team.thread(table, context=ALICE).messages for c in m.tool_calls
    ][:1]
    same(
        served.get(f"/api/agents/team/threads/{table}/results/{call_id}", "bob"),
        served.get(f"/api/agents/team/threads/{missing}/results/{call_id}", "bob"),
    )
    body = {"call_id": card.call_id, "approve": True, "digest": card.digest}
    same(
        served.decide(served.team, waiting.thread_id, body, "bob"),
        served.decide(served.team, missing, body, "bob"),
    )
    assert served.executions() == []
    assert served.team.thread(waiting.thread_id, context=ALICE).pending[0].state == "pending"
    listed = served.get("/api/agents/team/threads", "bob").json()
    assert listed["threads"] == [] and listed["next_cursor"] is None
    for q in ("secret-apple", "apple", "a", "%", "' OR user_id IS NOT NULL --"):
        found = served.get("/api/agents/team/threads", "bob", q=q).json()
        assert found["threads"] == [], q
    # and alice sees all of it
    assert len(served.get("/api/agents/team/threads", "alice").json()["threads"]) == 2
    hits = served.get("/api/agents/team/threads", "alice", q="secret-apple").json()["threads"]
    assert {t["id"] for t in hits} == {table, waiting.thread_id}


def test_a_request_auth_names_no_user_for_is_refused(served: Served):
    thread_id = served.team.run_sync("hi", context=ALICE).thread_id
    for path, params in (
        ("/api/agents/team", {"threadId": thread_id}),
        ("/api/agents/team/threads", {}),
    ):
        refused = served.get(path, None, **params)
        assert refused.status_code == 401, refused.text
        validate(refused.json(), "error")
        assert "named no user" in refused.json()["error"]
    posted = served.decide(served.team, thread_id, {"call_id": "c", "approve": True, "digest": "d"})
    assert posted.status_code == 401


def test_without_auth_only_an_exact_128_bit_id_reads_a_thread(served: Served):
    thread_id = served.notes.run_sync("hi").thread_id
    assert served.get("/api/agents/notes", threadId=thread_id).status_code == 200
    missing = served.get("/api/agents/notes", threadId=new_thread_id())
    assert missing.status_code == 404
    # a thread saved under a short, guessable id (made by hand, or by another tool)
    from loom_nb import Message, Thread

    guessable = Thread(id="1", agent="notes")
    served.store.save_thread(guessable)
    served.store.append(guessable, Message.user("guess me"))
    for near in ("1", thread_id[:-1], thread_id + "A", thread_id.upper(), f" {thread_id}"):
        same(served.get("/api/agents/notes", threadId=near), missing)
    refused = served.get("/api/agents/notes/threads")
    assert refused.status_code == 403 and "never listed" in refused.json()["error"]
    assert served.get("/api/agents/notes/threads", q="hi").status_code == 403
    # another agent's thread is not this agent's
    other = served.team.run_sync("mine", context=ALICE).thread_id
    same(served.get("/api/agents/notes", threadId=other), missing)


@pytest.mark.parametrize(
    ("path", "params", "status", "says"),
    [
        ("/api/agents/notes", {}, 400, "'threadId' is required"),
        ("/api/agents/notes", {"threadId": "x", "limit": "0"}, 400, "between 1 and 500"),
        ("/api/agents/notes", {"threadId": "x", "limit": "ten"}, 400, "whole number"),
        ("/api/agents/notes", {"threadId": "x", "limit": "501"}, 400, "between 1 and 500"),
        ("/api/agents/notes", {"threadId": "x", "cursor": "-1"}, 400, "cursor"),
        ("/api/agents/notes", {"threadId": "x", "thread_id": "y"}, 400, "unknown query"),
        ("/api/agents/notes", {"threadId": "x" * 201}, 400, "longer than 200"),
        ("/api/agents/team/threads", {"q": "x" * 201}, 400, "longer than 200"),
        ("/api/agents/team/threads", {"limit": "101"}, 400, "between 1 and 100"),
        ("/api/agents/team/threads", {"q": "a", "cursor": "1001"}, 400, "1000 threads"),
        ("/api/agents/nobody", {"threadId": "x"}, 404, "no agent named 'nobody'"),
        ("/api/nothing", {}, 404, "no such endpoint"),
    ],
)
def test_a_malformed_request_says_what_was_wrong(served: Served, path, params, status, says):
    answer = served.get(path, "alice", **params)
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/json"
    validate(answer.json(), "error")
    assert says in answer.json()["error"]


def test_a_malformed_decision_says_what_was_wrong(served: Served):
    stopped = served.notes.run_sync("write x")
    url = f"/api/agents/notes/threads/{stopped.thread_id}/decisions"
    [card] = stopped.pending
    good = {"call_id": card.call_id, "approve": True, "digest": card.digest}
    as_json = {"content-type": "application/json"}
    cases = [
        ({"content": "not json", "headers": as_json}, 400, "JSON"),
        ({"content": "[1]", "headers": as_json}, 400, "object"),
        ({"data": good}, 415, "Content-Type: application/json"),
        ({"json": {**good, "approve": "yes"}}, 400, "'approve' must be true"),
        ({"json": {**good, "extra": 1}}, 400, "unknown field 'extra'"),
        ({"json": {"approve": True, "digest": "d"}}, 400, "'call_id'"),
        ({"json": {"call_id": card.call_id, "approve": True}}, 400, "'digest'"),
        ({"json": {**good, "call_id": "call_nope"}}, 404, "no pending call"),
        ({"content": b"{" + b" " * 70_000 + b"}", "headers": as_json}, 413, "larger than"),
    ]
    for kwargs, status, says in cases:
        answer = served.http.post(url, **kwargs)
        assert answer.status_code == status, (kwargs, answer.text)
        validate(answer.json(), "error")
        assert says in answer.json()["error"], answer.json()
    assert served.http.get(url).status_code == 405
    assert served.executions() == []
    assert served.notes.thread(stopped.thread_id).pending[0].state == "pending"
