"""A question the agent asks (``ask_user``) answered over HTTP, on every store: the answer is
saved once by compare-and-set, bound to the digest that was shown, and reaches the model."""

from __future__ import annotations

import pytest

from tests.http.conftest import Served, validate

pytestmark = pytest.mark.slow


def answer(served: Served, thread_id: str, body: object) -> object:
    return served.http.post(f"/api/agents/notes/threads/{thread_id}/answers", json=body)


def test_a_question_is_answered_once_over_http(served: Served):
    asked = served.notes.run_sync("ask is it <b onmouseover=alert(1)>fiscal</b>?")
    [question] = asked.pending
    loaded = served.get("/api/agents/notes", threadId=asked.thread_id)
    validate(loaded.json(), "thread")
    assert loaded.json()["pending"][0]["tool"] == "ask_user"
    body = {"call_id": question.call_id, "answer": "yes", "digest": question.digest}
    done = answer(served, asked.thread_id, body)
    assert done.status_code == 200, done.text  # type: ignore[attr-defined]
    validate(done.json(), "answer")  # type: ignore[attr-defined]
    assert done.json()["status"] == "complete"  # type: ignore[attr-defined]
    parts = [p for m in done.json()["thread"]["messages"] for p in m["parts"]]  # type: ignore[attr-defined]
    assert parts[0]["kind"] == "tool_result" and parts[0]["content"] == "yes"
    assert served.notes.thread(asked.thread_id).last_text == "Done: yes"
    again = answer(served, asked.thread_id, {**body, "answer": "no"})
    assert again.status_code == 409 and again.json()["state"] == "done"  # type: ignore[attr-defined]
    validate(again.json(), "error")  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("change", "status", "said"),
    [
        ({"answer": "maybe"}, 400, "choose one of"),
        ({"answer": ""}, 400, "'answer' must be"),
        ({"digest": "0" * 16}, 409, "not the ones that were shown"),
        ({"extra": 1}, 400, "unknown field"),
        ({"call_id": "call_nope"}, 404, "no pending call"),
    ],
)
def test_a_wrong_answer_is_refused_and_the_question_still_waits(
    served: Served, change: dict, status: int, said: str
):
    asked = served.notes.run_sync("ask ok?")
    [question] = asked.pending
    body = {"call_id": question.call_id, "answer": "yes", "digest": question.digest, **change}
    refused = answer(served, asked.thread_id, body)
    assert refused.status_code == status and said in refused.json()["error"]  # type: ignore[attr-defined]
    assert served.notes.thread(asked.thread_id).pending[0].state == "pending"


def test_a_write_is_decided_at_decisions_and_a_question_answered_at_answers(served: Served):
    stopped = served.notes.run_sync("write hello")
    [card] = stopped.pending
    wrong = answer(
        served, stopped.thread_id, {"call_id": card.call_id, "answer": "yes", "digest": card.digest}
    )
    assert wrong.status_code == 400 and "/decisions" in wrong.json()["error"]  # type: ignore[attr-defined]
    asked = served.notes.run_sync("ask ok?")
    [question] = asked.pending
    body = {"call_id": question.call_id, "approve": True, "digest": question.digest}
    decided = served.decide(served.notes, asked.thread_id, body)
    assert decided.status_code == 400 and "/answers" in decided.json()["error"]
    assert served.executions() == []
