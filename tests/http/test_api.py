"""The thread API over a real uvicorn server, on every store: load, page, list, search, decide;
every answer keeps the schema; a thread over HTTP says what ``agent.thread(id)`` says."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pandas as pd
import pytest

from loom_nb import Thread, ToolCall
from loom_nb._code import call_words
from tests.http import agents
from tests.http.conftest import Served, rebuilt, validate
from tests.stores._processes import OPEN_STORE

pytestmark = pytest.mark.slow

ALICE = {"user": "alice"}


def assert_same_thread(answer: dict, thread: Thread, tools: dict) -> None:
    """Every message, call, result and card of ``answer`` is ``thread``'s."""
    assert (answer["id"], answer["agent"], answer["title"]) == (
        thread.id,
        thread.agent,
        thread.title,
    )
    assert answer["status"] == thread.status and answer["error"] == thread.error
    assert answer["usage"]["requests"] == thread.usage.requests
    start = int(answer["page"]["cursor"])
    saved = thread.messages[start : start + len(answer["messages"])]
    assert len(saved) == len(answer["messages"])
    for got, message in zip(answer["messages"], saved, strict=True):
        assert got["role"] == message.role
        assert got["created_at"] == message.created_at.isoformat()
        kinds = [p["kind"] for p in got["parts"]]
        assert kinds == [p.kind for p in message.parts]
        texts = [p["text"] for p in got["parts"] if p["kind"] == "text"]
        assert "".join(texts) == message.text
        for part, call in zip(
            [p for p in got["parts"] if p["kind"] == "tool_call"], message.tool_calls, strict=True
        ):
            assert (part["id"], part["name"], part["arguments"]) == (
                call.id,
                call.name,
                call.arguments,
            )
            assert part["words"] == call_words(call, tools.get(call.name))
        for part, result in zip(
            [p for p in got["parts"] if p["kind"] == "tool_result"],
            message.tool_results,
            strict=True,
        ):
            assert (part["call_id"], part["content"], part["approval"]) == (
                result.call_id,
                result.content,
                result.approval,
            )
            if isinstance(result.data, pd.DataFrame):
                table = part["data"]
                assert table["total_rows"] == len(result.data)
                head = result.data.head(len(table["rows"]))
                pd.testing.assert_frame_equal(rebuilt(table), head, check_dtype=True)
    pending = [(p["call_id"], p["digest"], p["state"]) for p in answer["pending"]]
    assert pending == [(p.call_id, p.digest, p.state) for p in thread.pending]


def load(served: Served, agent_name: str, thread_id: str, user: str | None = None, **params):
    response = served.get(f"/api/agents/{agent_name}", user, threadId=thread_id, **params)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    validate(response.json(), "thread")
    return response.json()


def test_a_thread_over_http_is_the_saved_thread(served: Served):
    thread_id = served.notes.run_sync("table").thread_id
    served.notes.run_sync("hello <script>alert(1)</script>\u2028 $\\foo$", thread_id=thread_id)
    answer = load(served, "notes", thread_id)
    thread = served.notes.thread(thread_id)
    assert_same_thread(answer, thread, served.notes.tools)
    [call] = [p for m in answer["messages"] for p in m["parts"] if p["kind"] == "tool_call"]
    assert call["words"] == f"orders · the first {agents.ROWS} orders"
    # the model's and the data's text arrive as the JSON strings they are
    assert answer["messages"][-2]["parts"][0]["text"].endswith("\u2028 $\\foo$")
    # the frame beyond the page's 50 rows, paged from the results endpoint, whole
    [result] = [p for m in answer["messages"] for p in m["parts"] if p["kind"] == "tool_result"]
    first = result["data"]
    assert len(first["rows"]) == 50 and first["total_rows"] == agents.ROWS
    pages, cursor = [rebuilt(first)], first["next"].split("?cursor=")[1]
    url = first["next"].split("?")[0]
    while cursor is not None:
        response = served.http.get(url, params={"cursor": cursor, "limit": 30})
        assert response.status_code == 200, response.text
        validate(response.json(), "frame_page")
        pages.append(rebuilt(response.json()["table"]))
        cursor = response.json()["next_cursor"]
    assert len(pages) == 4
    whole = pd.concat(pages)
    pd.testing.assert_frame_equal(whole, agents.frame(), check_dtype=True)


def test_a_long_thread_comes_in_pages(served: Served):
    thread_id = served.notes.run_sync("one").thread_id
    for text in ("two", "three", "four"):
        served.notes.run_sync(text, thread_id=thread_id)
    thread = served.notes.thread(thread_id)
    seen, cursor = [], None
    while True:
        params = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        answer = load(served, "notes", thread_id, **params)
        assert len(answer["messages"]) <= 3
        assert_same_thread(answer, thread, served.notes.tools)
        seen += [m["index"] for m in answer["messages"]]
        cursor = answer["page"]["next_cursor"]
        if cursor is None:
            break
    assert seen == list(range(len(thread.messages))) == list(range(8))


def test_a_users_threads_newest_first_searched_and_paged(served: Served):
    mine = [served.team.run_sync(f"note {i} apple", context=ALICE).thread_id for i in range(5)]
    served.team.run_sync("note banana", context=ALICE)
    served.team.run_sync("bob's apple", context={"user": "bob"})
    listed, cursor = [], None
    while True:
        response = served.get(
            "/api/agents/team/threads", "alice", limit=2, **({"cursor": cursor} if cursor else {})
        )
        assert response.status_code == 200, response.text
        validate(response.json(), "threads")
        listed += [t["id"] for t in response.json()["threads"]]
        cursor = response.json()["next_cursor"]
        if cursor is None:
            break
    assert listed == [t.id for t in served.team.threads(context=ALICE)]
    assert len(listed) == 6
    found = served.get("/api/agents/team/threads", "alice", q="APPLE", limit=3).json()
    validate(found, "threads")
    assert [t["id"] for t in found["threads"]] == mine[::-1][:3]
    rest = served.get(
        "/api/agents/team/threads", "alice", q="apple", limit=3, cursor=found["next_cursor"]
    ).json()
    assert [t["id"] for t in rest["threads"]] == mine[::-1][3:] and rest["next_cursor"] is None
    # text meant for SQL is searched for as text
    for hostile in ("' OR '1'='1", "%", "_", "\\", "apple'; DROP TABLE threads; --"):
        answer = served.get("/api/agents/team/threads", "alice", q=hostile)
        assert answer.status_code == 200 and answer.json()["threads"] == []
    assert len(served.team.threads(context=ALICE)) == 6


def test_a_decision_over_http_runs_the_call_once(served: Served):
    stopped = served.team.run_sync("write hello", context=ALICE)
    [card] = stopped.pending
    answer = load(served, "team", stopped.thread_id, "alice")
    assert answer["status"] == "awaiting_approval"
    assert answer["pending"][0]["state"] == "pending"
    assert answer["pending"][0]["preview"] == {"will_write": "hello"}
    body = {"call_id": card.call_id, "approve": True, "digest": answer["pending"][0]["digest"]}
    decided = served.decide(served.team, stopped.thread_id, body, "alice")
    assert decided.status_code == 200, decided.text
    validate(decided.json(), "decision")
    assert decided.json()["status"] == "complete"
    assert [p["kind"] for m in decided.json()["thread"]["messages"] for p in m["parts"]] == [
        "tool_result",
        "text",
    ]
    assert [line.split()[1] for line in served.executions()] == ["hello"]
    again = served.decide(served.team, stopped.thread_id, body, "alice")
    assert again.status_code == 409 and again.json()["state"] == "done"
    validate(again.json(), "error")
    assert "already decided" in again.json()["error"]
    assert len(served.executions()) == 1
    thread = served.team.thread(stopped.thread_id, context=ALICE)
    assert [r.approval for r in thread.tool_results()] == ["approved"]
    assert_same_thread(load(served, "team", thread.id, "alice"), thread, served.team.tools)


def test_a_rejection_over_http_runs_nothing_and_a_stale_digest_is_refused(served: Served):
    stopped = served.notes.run_sync("write nope")
    [card] = stopped.pending
    stale = {"call_id": card.call_id, "approve": True, "digest": "0" * 16}
    refused = served.decide(served.notes, stopped.thread_id, stale)
    assert refused.status_code == 409 and "not the ones that were shown" in refused.json()["error"]
    body = {"call_id": card.call_id, "approve": False, "digest": card.digest}
    decided = served.decide(served.notes, stopped.thread_id, body)
    assert decided.status_code == 200 and decided.json()["status"] == "complete"
    assert served.executions() == []
    thread = served.notes.thread(stopped.thread_id)
    assert [r.approval for r in thread.tool_results()] == ["rejected"]


def test_two_http_clients_deciding_one_call_run_it_once(served: Served):
    stopped = served.notes.run_sync("write twice")
    [card] = stopped.pending
    body = {"call_id": card.call_id, "approve": True, "digest": card.digest}
    answers: list[int] = []
    go = threading.Barrier(2)

    def post() -> None:
        import httpx

        with httpx.Client(base_url=served.url, timeout=60) as client:
            go.wait()
            url = f"/api/agents/notes/threads/{stopped.thread_id}/decisions"
            answers.append(client.post(url, json=body).status_code)

    clients = [threading.Thread(target=post) for _ in range(2)]
    for c in clients:
        c.start()
    for c in clients:
        c.join(60)
    assert sorted(answers) == [200, 409]
    assert len(served.executions()) == 1


DECIDE_IN_A_CHILD = (
    OPEN_STORE
    + """
from loom_nb import CallAlreadyDecided, Decision
from tests.http import agents
notes, team = agents.make(store, sys.argv[2])
thread_id, call_id, digest = sys.argv[3:6]
print("ready", flush=True)
sys.stdin.readline()
try:
    team.resume_sync(thread_id, {call_id: Decision(True, digest)}, context={"user": "alice"})
    print("won", flush=True)
except CallAlreadyDecided as exc:
    print("already", exc.state, flush=True)
store.close()
"""
)


def test_an_http_post_and_another_process_deciding_one_call_run_it_once(shared_served: Served):
    """A kernel deciding (what its card's click does: ``agent.resume``) against a POST."""
    served, rounds = shared_served, 4
    if served.backend.name == "sqlite":
        target = str(served.backend.path)  # type: ignore[attr-defined]
    else:
        target = f"{served.backend.database.dsn()}#{served.backend.schema}"  # type: ignore[attr-defined]
    root = Path(__file__).parents[2]
    for n in range(rounds):
        stopped = served.team.run_sync(f"write race{n}", context=ALICE)
        [card] = stopped.pending
        child = subprocess.Popen(
            [
                *(sys.executable, "-c", DECIDE_IN_A_CHILD, target, str(served.writes)),
                *(stopped.thread_id, card.call_id, card.digest),
            ],
            cwd=root,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert child.stdin is not None and child.stdout is not None
        assert child.stdout.readline().strip() == "ready", child.stderr.read()  # type: ignore[union-attr]
        child.stdin.write("go\n")
        child.stdin.flush()
        body = {"call_id": card.call_id, "approve": True, "digest": card.digest}
        posted = served.decide(served.team, stopped.thread_id, body, "alice")
        said, errors = child.communicate(timeout=60)
        assert child.returncode == 0, errors
        winners = (posted.status_code == 200) + (said.strip() == "won")
        assert winners == 1, (posted.status_code, posted.text, said)
        if posted.status_code != 200:
            assert posted.status_code == 409 and posted.json()["call_id"] == card.call_id
        else:
            assert said.startswith("already")
        ran = [line for line in served.executions() if line.endswith(f" race{n}")]
        assert len(ran) == 1
        thread = served.team.thread(stopped.thread_id, context=ALICE)
        assert [r.approval for r in thread.tool_results()] == ["approved"]


def test_a_call_words_match_the_notebooks():
    call = ToolCall("c", "orders", {"limit": 3})
    notes, _ = agents.make()
    assert call_words(call, notes.tools["orders"]) == "orders · the first 3 orders"
