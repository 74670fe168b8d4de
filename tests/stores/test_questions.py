"""``ask_user`` on every store: the run pauses with a pending question saved like a pending
call, answered once by compare-and-set, and the answer reaches the model as the tool's result."""

from __future__ import annotations

from typing import Any

import pytest

from loom_nb import (
    CallAlreadyDecided,
    FunctionModel,
    ReplayModel,
    Reply,
    Store,
    ThreadWaiting,
    UserError,
    define_agent,
)
from loom_nb.models import ModelRequest

ASK = Reply(
    "",
    [
        (
            "ask_user",
            {"question": "Last quarter: fiscal or calendar?", "choices": ["fiscal", "calendar"]},
        )
    ],
)


def asker(store: Store, replies: list[Any] | None = None, **kwargs: Any) -> Any:
    model = ReplayModel(replies if replies is not None else [ASK, "Fiscal it is."])
    return define_agent(name="analyst", model=model, store=store, **kwargs)


def test_a_question_waits_as_a_pending_call_and_its_answer_is_the_tools_result(store: Store):
    agent = asker(store)
    asked = agent.run_sync("sales last quarter?")
    assert asked.status == "awaiting_approval"
    (question,) = asked.pending
    assert question.tool == "ask_user" and question.state == "pending"
    assert question.arguments["choices"] == ["fiscal", "calendar"]
    saved = store.load(asked.thread_id)  # durable: saved with the message that asked
    assert saved is not None and saved.pending[0].call_id == question.call_id
    done = agent.resume_sync(asked.thread_id, {question.call_id: "fiscal"})
    assert done.status == "complete" and done.output == "Fiscal it is."
    (answer,) = [r for m in done.thread.messages for r in m.tool_results]
    assert (answer.name, answer.content, answer.is_error) == ("ask_user", "fiscal", False)
    model = agent.model
    assert model.requests[-1].messages[-1].tool_results[0].content == "fiscal"
    with pytest.raises(CallAlreadyDecided):  # answered once
        agent.resume_sync(asked.thread_id, {question.call_id: "calendar"})


def test_a_question_is_answered_in_a_new_store_object_after_a_restart(backend: Any):
    first = backend.open()
    asked = asker(first).run_sync("sales?")
    (question,) = asked.pending
    if backend.name != "memory":
        first.close()
    again = backend.open()  # a new kernel: another store object on the same data
    agent = asker(again, ["Fiscal it is."])
    with pytest.raises(ThreadWaiting, match="waits for your answer"):
        agent.run_sync("something else", thread_id=asked.thread_id)
    done = agent.resume_sync(asked.thread_id, {question.call_id: "fiscal"})
    assert done.status == "complete"
    answers = [r.content for m in done.thread.messages for r in m.tool_results]
    assert answers == ["fiscal"]
    again.close()


def test_an_answer_outside_the_choices_or_empty_is_refused_and_nothing_is_saved(store: Store):
    agent = asker(store)
    asked = agent.run_sync("sales?")
    call_id = asked.pending[0].call_id
    with pytest.raises(UserError, match="choose one of"):
        agent.resume_sync(asked.thread_id, {call_id: "both"})
    with pytest.raises(UserError, match="empty"):
        agent.resume_sync(asked.thread_id, {call_id: "  "})
    with pytest.raises(UserError, match="answer it with text"):
        agent.resume_sync(asked.thread_id, {call_id: True})
    assert agent.thread(asked.thread_id).pending[0].state == "pending"


def test_a_free_question_takes_any_text_and_false_declines(store: Store):
    free = Reply("", [("ask_user", {"question": "Which region?"})])
    agent = asker(store, [free, "ok", free, "fine"])
    asked = agent.run_sync("go")
    done = agent.resume_sync(asked.thread_id, {asked.pending[0].call_id: "EMEA, without UK"})
    assert done.thread.messages[-2].tool_results[0].content == "EMEA, without UK"
    again = agent.run_sync("again", thread_id=asked.thread_id)
    declined = agent.resume_sync(again.thread_id, {again.pending[0].call_id: False})
    last = declined.thread.messages[-2].tool_results[0]
    assert last.is_error and "chose not to answer" in last.content


def test_bad_questions_go_back_to_the_model_as_errors(store: Store):
    seen: list[str] = []

    def model(request: ModelRequest) -> Any:
        last = request.messages[-1]
        if last.role == "user":
            return Reply("", [("ask_user", {"question": "", "choices": ["a"]})])
        seen.append(last.tool_results[0].content)
        return "gave up"

    agent = define_agent(name="analyst", model=FunctionModel(model), store=store)
    done = agent.run_sync("go")
    assert done.status == "complete" and "Invalid arguments for 'ask_user'" in seen[0]


def test_ask_user_is_on_by_default_and_off_with_a_setting(store: Store):
    assert "ask_user" in asker(store).tools
    assert "ask_user" not in asker(store, ask_user=False).tools
    with pytest.raises(UserError, match="ask_user"):
        asker(store, ask_user="yes")
    # an agent's tools given to another agent: its question tool is the one built in
    again = define_agent(name="b", model=ReplayModel([]), tools=asker(store).tools, store=store)
    assert list(again.tools) == ["ask_user"]
    off = define_agent(
        name="b", model=ReplayModel([]), tools=asker(store).tools, store=store, ask_user=False
    )
    assert list(off.tools) == []
