"""The agent loop as a user meets it: runs, tool results, errors, approvals, context, auth."""

from __future__ import annotations

import asyncio
import json

import pytest

from loom_nb import (
    ApprovalRequested,
    Decision,
    DuplicateToolError,
    FunctionModel,
    MessageAdded,
    ModelError,
    ReplayModel,
    Reply,
    RunContext,
    TextDelta,
    ThreadNotFound,
    ThreadWaiting,
    UserError,
    connector,
    define_agent,
    memory_store,
    tool,
)
from loom_nb._messages import ToolCall
from loom_nb.sqlite import sqlite_store


@tool
def get_invoice(invoice_id: str) -> dict:
    """Fetch one invoice by its id."""
    return {"id": invoice_id, "total": 12.5}


def error_of(result_message) -> dict:
    return json.loads(result_message.content)["error"]


def test_text_only_run_completes_and_saves_the_thread():
    model = ReplayModel(["Hello there."])
    agent = define_agent(name="a", model=model, instructions="Be brief.")
    result = agent.run_sync("Hi")
    assert result.status == "complete"
    assert result.output == "Hello there."
    assert [m.role for m in result.thread.messages] == ["user", "assistant"]
    assert model.requests[0].instructions == "Be brief."
    saved = agent.thread(result.thread_id)
    assert saved.to_dict() == result.thread.to_dict()
    assert saved.title == "Hi"


async def test_async_run_and_a_tool_round_trip():
    model = ReplayModel(
        [
            Reply("Let me look.", [("get_invoice", {"invoice_id": "42"})]),
            "Invoice 42 totals 12.5.",
        ]
    )
    billing = connector("billing", {"get_invoice": get_invoice})
    agent = define_agent(name="helper", model=model, connectors=[billing])
    result = await agent.run("What is invoice 42?")
    assert result.output == "Invoice 42 totals 12.5."
    tool_msg = result.thread.messages[2]
    assert tool_msg.role == "tool"
    assert tool_msg.tool_results[0].data == {"id": "42", "total": 12.5}
    # the model's second turn saw the result and knew the tool
    second = model.requests[1]
    assert second.messages[-1].tool_results[0].content == '{"id": "42", "total": 12.5}'
    assert [t.name for t in second.tools] == ["get_invoice", "ask_user"]  # ask_user: built in
    assert second.tools[0].parameters["required"] == ["invoice_id"]


def test_continuing_a_thread_sends_the_history():
    model = ReplayModel(["First.", "Second."])
    agent = define_agent(name="a", model=model)
    first = agent.run_sync("one")
    second = agent.run_sync("two", thread_id=first.thread_id)
    assert second.thread_id == first.thread_id
    assert [m.text for m in model.requests[1].messages] == ["one", "First.", "two"]
    assert len(agent.thread(first.thread_id).messages) == 4


async def test_async_tools_of_one_turn_run_concurrently():
    # Each tool waits for the other: they finish only if they run at the same time.
    a_started, b_started = asyncio.Event(), asyncio.Event()

    @tool
    async def tool_a() -> str:
        a_started.set()
        await asyncio.wait_for(b_started.wait(), 5)
        return "a"

    @tool
    async def tool_b() -> str:
        b_started.set()
        await asyncio.wait_for(a_started.wait(), 5)
        return "b"

    model = ReplayModel([Reply("", [("tool_a", {}), ("tool_b", {})]), "done"])
    agent = define_agent(name="a", model=model, tools=[tool_a, tool_b])
    result = await agent.run("go")
    results = result.thread.messages[2].tool_results
    assert [(r.name, r.content, r.is_error) for r in results] == [
        ("tool_a", "a", False),
        ("tool_b", "b", False),
    ]


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (("explode", {}), "RuntimeError: boom"),
        (("get_invoice", {"invoice_id": 42, "extra": 1}), "Invalid arguments for 'get_invoice'"),
        (("no_such_tool", {}), "There is no tool named 'no_such_tool'"),
        (("get_invoice", '{"invoice_id": "4'), "not a JSON object"),
    ],
)
def test_bad_calls_go_back_to_the_model_as_errors_and_the_run_goes_on(call, expected):
    @tool
    def explode() -> str:
        raise RuntimeError("boom")

    model = ReplayModel([Reply("", [call]), "Sorry, that failed."])
    agent = define_agent(name="a", model=model, tools=[get_invoice, explode])
    result = agent.run_sync("try")
    assert result.status == "complete"
    assert result.output == "Sorry, that failed."
    sent = model.requests[1].messages[-1].tool_results[0]
    assert sent.is_error
    assert expected in error_of(sent)


def test_step_limit_pauses_a_model_that_never_finishes_and_continues():
    model = FunctionModel(lambda req: Reply("", [("get_invoice", {"invoice_id": "1"})]))
    agent = define_agent(name="a", model=model, tools=[get_invoice], max_steps=3)
    result = agent.run_sync("loop forever")
    assert result.status == "awaiting_approval"
    assert len(model.requests) == 3
    [pause] = result.pending
    assert pause.tool == "max_steps" and "3 more turns" in pause.preview
    thread = agent.thread(result.thread_id)
    assert thread.status == "awaiting_approval"
    assert len(thread.messages) == 8  # user + 3 x (assistant, tool) + the pause: nothing lost
    with pytest.raises(ThreadWaiting):
        agent.run_sync("go on", thread_id=result.thread_id)
    again = agent.resume_sync(result.thread_id, {pause.call_id: True})
    assert again.status == "awaiting_approval" and len(model.requests) == 6
    # the model never sees the pause
    assert all("max_steps" not in str(m.parts) for m in model.requests[-1].messages)
    stopped = agent.resume_sync(again.thread_id, {again.pending[0].call_id: False})
    assert stopped.status == "complete" and len(model.requests) == 6


def test_a_model_failure_keeps_what_completed_and_says_so():
    def flaky(request):
        if len(request.messages) > 1:
            raise ConnectionError("server went away")
        return Reply("", [("get_invoice", {"invoice_id": "9"})])

    agent = define_agent(name="a", model=FunctionModel(flaky), tools=[get_invoice])
    with pytest.raises(ModelError, match="server went away") as info:
        agent.run_sync("hi")
    thread = agent.thread(info.value.result.thread_id)
    assert [m.role for m in thread.messages] == ["user", "assistant", "tool"]
    assert "server went away" in thread.error
    # the next prompt clears the error and goes on
    agent.model = ReplayModel(["Back."])
    assert agent.run_sync("again", thread_id=thread.id).status == "complete"


# ---- approvals --------------------------------------------------------------------------------


def make_writer(log: list):
    @tool(needs_approval=True, preview=lambda args: {"will_write": args["text"]})
    def write_note(text: str) -> str:
        """Write a note."""
        log.append(text)
        return "written"

    return write_note


def test_a_prompt_to_another_agents_thread_is_refused_before_it_is_touched():
    store = memory_store()
    mine = define_agent(name="a", model=ReplayModel(["Hello."]), store=store)
    other = define_agent(name="b", model=ReplayModel(["Mine now."]), store=store)
    tid = mine.run_sync("hello").thread_id
    before = store.thread_version(tid)
    with pytest.raises(ThreadNotFound, match=f"no thread '{tid}' for agent 'b'"):
        other.run_sync("take it", thread_id=tid)
    assert store.thread_version(tid) == before  # no lease taken, nothing recorded
    assert [m.text for m in store.load(tid).messages] == ["hello", "Hello."]


def test_a_call_needing_approval_stops_the_run_and_runs_nothing():
    log: list[str] = []
    model = ReplayModel([Reply("Writing.", [("write_note", {"text": "hello"})]), "Done."])
    store = memory_store()
    agent = define_agent(name="a", model=model, tools=[make_writer(log)], store=store)
    result = agent.run_sync("note hello")
    assert result.status == "awaiting_approval"
    assert log == []
    [pending] = result.pending
    assert (pending.tool, pending.arguments, pending.preview) == (
        "write_note",
        {"text": "hello"},
        {"will_write": "hello"},
    )
    # the pending call lives in the saved thread
    assert store.load(result.thread_id).pending[0].call_id == pending.call_id
    # nothing else can happen in the thread until it is decided: a typed error says which
    for attempt in (
        lambda: agent.run_sync("something else", thread_id=result.thread_id),
        lambda: agent.check_thread(result.thread_id),
    ):
        with pytest.raises(ThreadWaiting, match="waits for approval of write_note") as waits:
            attempt()
        assert waits.value.thread_id == result.thread_id
        assert [p.call_id for p in waits.value.waiting] == [pending.call_id]
    assert [m.text for m in store.load(result.thread_id).messages if m.role == "user"] == [
        "note hello"
    ]
    with pytest.raises(ThreadNotFound, match="no thread 'nope' for agent 'a'"):
        agent.check_thread("nope")
    with pytest.raises(ThreadNotFound, match="no thread 'nope' for agent 'a'"):
        agent.run_sync("hello?", thread_id="nope")

    done = agent.resume_sync(result.thread_id, {pending.call_id: True})
    assert done.status == "complete" and done.output == "Done."
    assert log == ["hello"]
    [res] = done.thread.messages[-2].tool_results
    assert (res.content, res.approval) == ("written", "approved")
    assert done.thread.pending == []


def test_a_kept_thread_deleted_elsewhere_is_not_found_by_the_next_prompt():
    store = memory_store()
    agent = define_agent(name="a", model=ReplayModel(["One.", "Two."]), store=store)
    tid = agent.run_sync("one").thread_id  # kept by this agent object
    define_agent(name="a", model=ReplayModel([]), store=store).delete_thread(tid)  # a re-run cell
    with pytest.raises(ThreadNotFound, match=f"no thread '{tid}' for agent 'a'"):
        agent.run_sync("two", thread_id=tid)  # refused by the lease: the store has no such thread
    assert store.load(tid) is None and store.list() == []


def test_a_rejected_call_reaches_the_model_as_an_error_and_nothing_runs():
    log: list[str] = []
    model = ReplayModel([Reply("", [("write_note", {"text": "x"})]), "Understood."])
    agent = define_agent(name="a", model=model, tools=[make_writer(log)])
    stopped = agent.run_sync("go")
    done = agent.resume_sync(stopped.thread_id, {stopped.pending[0].call_id: False})
    assert log == []
    sent = model.requests[1].messages[-1].tool_results[0]
    assert sent.approval == "rejected"
    assert "rejected" in error_of(sent)
    assert done.output == "Understood."


def test_calls_without_approval_run_at_once_and_pending_ones_wait():
    log: list[str] = []
    model = ReplayModel(
        [
            Reply(
                "",
                [
                    ("get_invoice", {"invoice_id": "1"}),
                    ("write_note", {"text": "a"}),
                    ("write_note", {"text": "b"}),
                ],
            ),
            "All done.",
        ]
    )
    agent = define_agent(name="a", model=model, tools=[get_invoice, make_writer(log)])
    first = agent.run_sync("go")
    assert first.thread.messages[-1].tool_results[0].name == "get_invoice"
    a, b = first.pending
    # a partial decision is recorded; the run waits for the other one
    partial = agent.resume_sync(first.thread_id, {a.call_id: True})
    assert partial.status == "awaiting_approval" and log == []
    assert agent.thread(first.thread_id).pending[0].decision is True
    done = agent.resume_sync(first.thread_id, {b.call_id: Decision(False, b.digest)})
    assert done.status == "complete" and log == ["a"]
    # the model saw one result per call, in the order it made them
    results = [r for m in model.requests[1].messages for r in m.tool_results]
    assert [r.call_id for r in results] == [c.id for c in first.thread.messages[1].tool_calls]


def test_a_decision_binds_to_the_arguments_that_were_shown():
    log: list[str] = []
    model = ReplayModel([Reply("", [("write_note", {"text": "shown"})]), "ok"])
    agent = define_agent(name="a", model=model, tools=[make_writer(log)])
    result = agent.run_sync("go")
    pending = result.pending[0]
    with pytest.raises(UserError, match="not the ones that were shown"):
        agent.resume_sync(result.thread_id, {pending.call_id: Decision(True, "0" * 16)})
    with pytest.raises(UserError, match="no pending call"):
        agent.resume_sync(result.thread_id, {"call_unknown": True})
    assert log == []
    agent.resume_sync(result.thread_id, {pending.call_id: Decision(True, pending.digest)})
    assert log == ["shown"]


def test_approval_rule_on_the_arguments():
    log: list[float] = []

    @tool(needs_approval=lambda args: args["amount"] > 100)
    def refund(amount: float) -> str:
        log.append(amount)
        return "refunded"

    model = ReplayModel(
        [
            Reply("", [("refund", {"amount": 5})]),
            Reply("", [("refund", {"amount": 500})]),
        ]
    )
    agent = define_agent(name="a", model=model, tools=[refund])
    result = agent.run_sync("refund")
    assert result.status == "awaiting_approval"
    assert log == [5]  # the small refund ran at once; the large one waits
    assert result.pending[0].arguments == {"amount": 500}


# ---- context, auth, events ----------------------------------------------------------------------


def test_run_context_reaches_tools():
    seen: list[tuple] = []

    @tool
    def whoami(ctx: RunContext) -> str:
        seen.append((ctx.agent, ctx.thread_id, ctx.user_id, ctx["tenant"]))
        return "ok"

    model = ReplayModel([Reply("", [("whoami", {})]), "done"])
    agent = define_agent(name="a", model=model, tools=[whoami])
    result = agent.run_sync("who", context={"tenant": "acme"})
    assert seen == [("a", result.thread_id, None, "acme")]


def test_auth_scopes_threads_to_their_user():
    model = FunctionModel(lambda req: "hi")
    agent = define_agent(name="a", model=model, auth=lambda ctx: ctx.get("user"))
    ann = agent.run_sync("hello", context={"user": "ann"})
    assert ann.thread.user_id == "ann"
    assert [t.id for t in agent.threads(context={"user": "ann"})] == [ann.thread_id]
    assert agent.threads(context={"user": "bob"}) == []
    # another user's thread reads exactly like one that does not exist
    with pytest.raises(ThreadNotFound, match="no thread") as foreign:
        agent.thread(ann.thread_id, context={"user": "bob"})
    with pytest.raises(ThreadNotFound, match="no thread") as unknown:
        agent.thread("no-such-id", context={"user": "bob"})
    assert str(foreign.value).replace(ann.thread_id, "X") == str(unknown.value).replace(
        "no-such-id", "X"
    )
    with pytest.raises(ThreadNotFound, match=f"no thread '{ann.thread_id}'"):
        agent.run_sync("hijack", thread_id=ann.thread_id, context={"user": "bob"})
    with pytest.raises(ThreadNotFound, match=f"no thread '{ann.thread_id}'"):
        agent.delete_thread(ann.thread_id, context={"user": "bob"})
    with pytest.raises(UserError, match="returned no user"):
        agent.run_sync("anonymous")


def test_events_stream_text_messages_and_approvals():
    events: list = []
    model = ReplayModel([Reply("one two three", [("write_note", {"text": "x"})])])
    agent = define_agent(name="a", model=model, tools=[make_writer([])])
    agent.run_sync("go", on_event=events.append)
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert deltas == ["one ", "two ", "three"]
    added = [e.message.role for e in events if isinstance(e, MessageAdded)]
    assert added == ["user", "assistant"]
    assert isinstance(events[-1], ApprovalRequested)


async def test_async_event_handlers_are_awaited():
    seen: list[str] = []

    async def on_event(event):
        await asyncio.sleep(0)
        if isinstance(event, MessageAdded):
            seen.append(event.message.role)

    agent = define_agent(name="a", model=ReplayModel(["hi"]))
    await agent.run("hello", on_event=on_event)
    assert seen == ["user", "assistant"]


async def test_an_interrupted_run_keeps_what_completed_and_the_thread_goes_on():
    started = asyncio.Event()

    @tool
    async def slow() -> str:
        started.set()
        await asyncio.sleep(60)
        return "never"

    model = ReplayModel([Reply("Working.", [("slow", {})])])
    agent = define_agent(name="a", model=model, tools=[slow])
    task = asyncio.create_task(agent.run("go"))
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError, match=r"^$"):
        await task
    [info] = agent.threads()
    thread = agent.thread(info.id)
    assert [m.role for m in thread.messages] == ["user", "assistant"]
    assert "interrupted" in thread.error
    # the next prompt answers the dangling call first, so the model sees a consistent history
    model.add("Fine.")
    await agent.run("go on", thread_id=info.id)
    history = model.requests[-1].messages
    assert [m.role for m in history] == ["user", "assistant", "tool", "user"]
    assert "interrupted" in error_of(history[2].tool_results[0])


# ---- definition-time checks ---------------------------------------------------------------------


def test_duplicate_tool_names_fail_at_definition_naming_both_places():
    billing = connector("billing", {"get_invoice": get_invoice})
    other = connector("ledger", {"get_invoice": get_invoice})
    with pytest.raises(
        DuplicateToolError, match="'get_invoice': in the agent's tools and connector 'billing'"
    ):
        define_agent(name="a", model=ReplayModel([]), tools=[get_invoice], connectors=[billing])
    with pytest.raises(DuplicateToolError, match="connector 'billing' and connector 'ledger'"):
        define_agent(name="a", model=ReplayModel([]), connectors=[billing, other])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": ""}, "non-empty name"),
        ({"model": "gpt-4"}, "not a model"),
        ({"model": "nosuch:model"}, "unknown model provider 'nosuch'"),
        ({"max_steps": 0}, "max_steps"),
        ({"store": object()}, "not a store"),
        ({"connectors": [get_invoice]}, "connectors=\\[...\\] takes connectors"),
        ({"auth": "ann"}, "auth must be a function"),
    ],
)
def test_configuration_mistakes_fail_at_definition(kwargs, message):
    args = {"name": "a", "model": ReplayModel([]), **kwargs}
    with pytest.raises(UserError, match=message):
        define_agent(**args)


def test_empty_prompt_and_unknown_threads_are_user_errors():
    agent = define_agent(name="a", model=ReplayModel(["hi"]))
    with pytest.raises(UserError, match="prompt is empty"):
        agent.run_sync("  ")
    with pytest.raises(ThreadNotFound, match=r"agent\.threads\(\)"):
        agent.run_sync("hi", thread_id="nope")
    tid = agent.run_sync("hi").thread_id
    with pytest.raises(UserError, match="no call waiting"):
        agent.resume_sync(tid, {})


def test_thread_of_another_agent_is_not_found():
    store = memory_store()
    a = define_agent(name="a", model=ReplayModel(["x"]), store=store)
    b = define_agent(name="b", model=ReplayModel(["y"]), store=store)
    tid = a.run_sync("hi").thread_id
    with pytest.raises(ThreadNotFound, match=f"no thread '{tid}' for agent 'b'"):
        b.run_sync("hi", thread_id=tid)


def test_tool_call_without_json_object_is_not_run_and_its_raw_text_is_saved(tmp_path):
    ran: list[str] = []

    @tool
    def get_invoice(invoice_id: str) -> str:
        ran.append(invoice_id)
        return "never"

    model = ReplayModel([Reply("", [ToolCall("c1", "get_invoice", None, "[1, 2]")]), "ok"])
    store = sqlite_store(tmp_path / "loom.db")
    agent = define_agent(name="a", model=model, tools=[get_invoice], store=store)
    thread_id = agent.run_sync("go").thread_id
    store.close()
    assert ran == []
    # After a restart, the saved thread still shows what the model sent, and the answer it got.
    again = sqlite_store(tmp_path / "loom.db")
    saved = define_agent(name="a", model=ReplayModel([]), store=again).thread(thread_id)
    again.close()
    assert saved.messages[1].tool_calls[0].raw_arguments == "[1, 2]"
    assert "not a JSON object: '[1, 2]'" in error_of(saved.messages[2].tool_results[0])
