"""A call that needs approval, through its lifecycle, and the thread's lease, on every store:
the store contract's compare-and-set steps, then the agent on top (in one process;
tests/sqlite/test_lifecycle_processes.py does it across real processes)."""

from __future__ import annotations

import functools
import re
import socket
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone

import pytest

from loom_nb import (
    CallAlreadyDecided,
    Decision,
    Message,
    PendingApproval,
    ReplayModel,
    Reply,
    RunContext,
    Store,
    Thread,
    ThreadBusy,
    ToolCall,
    ToolResult,
    UserError,
    define_agent,
    tool,
)
from tests.stores._threads import writer

DEAD = "elsewhere:1:dead"  # a holder on another host: only its lease's expiry tells


def asking(store: Store, *call_ids: str) -> Thread:
    """A thread whose last turn asks approval for ``call_ids`` (saved as the agent saves it)."""
    thread = Thread(id=f"t-{'-'.join(call_ids)}", agent="a")
    store.save_thread(thread)
    calls = [ToolCall(c, "insert", {"row": c}) for c in call_ids]
    message = Message("assistant", list(calls))
    pending = [PendingApproval(c, "insert", {"row": c}, preview={"rows": [c]}) for c in call_ids]
    thread.messages.append(message)
    store.append(thread, message, pending=pending)
    return thread


def states(store: Store, thread_id: str) -> dict[str, str]:
    loaded = store.load(thread_id)
    assert loaded is not None
    return {p.call_id: p.state for p in loaded.pending}


def result_message(*call_ids: str) -> Message:
    return Message("tool", [ToolResult(c, "insert", "inserted") for c in call_ids])


# ---- the store contract --------------------------------------------------------------------------


def test_an_approval_request_is_saved_with_its_cards(store: Store):
    thread = asking(store, "c1", "c2")
    loaded = store.load(thread.id)
    assert [m.tool_calls[0].id for m in loaded.messages] == ["c1"]
    assert [(p.call_id, p.state, p.preview) for p in loaded.pending] == [
        ("c1", "pending", {"rows": ["c1"]}),
        ("c2", "pending", {"rows": ["c2"]}),
    ]
    assert loaded.status == "awaiting_approval"
    assert store.list()[0].pending_count == 2


def test_each_step_is_a_compare_and_set(store: Store):
    thread = asking(store, "c1", "c2")
    store.update_calls(thread.id, ["c1"], "approved", expect={"pending"})
    with pytest.raises(CallAlreadyDecided, match="call c1 was already decided in another kernel"):
        store.update_calls(thread.id, ["c1"], "rejected", expect={"pending"})
    # all or nothing: c2 is not rejected because c1 did not match
    with pytest.raises(CallAlreadyDecided, match="it is approved now") as caught:
        store.update_calls(thread.id, ["c2", "c1"], "rejected", expect={"pending"})
    assert caught.value.state == "approved"
    assert states(store, thread.id) == {"c1": "approved", "c2": "pending"}

    store.update_calls(thread.id, ["c1"], "running", expect={"approved"}, holder="h:1:a")
    with pytest.raises(CallAlreadyDecided, match="running now"):  # claimed once only
        store.update_calls(thread.id, ["c1"], "running", expect={"approved"}, holder="h:1:b")
    with pytest.raises(CallAlreadyDecided, match=r"c1 was already decided.*running now"):
        store.update_calls(  # only its holder finishes it
            thread.id,
            ["c1"],
            "done",
            expect={"running"},
            holder="h:1:b",
            message=result_message("c1"),
        )
    assert store.load(thread.id).pending[0].holder == "h:1:a"

    store.update_calls(
        thread.id, ["c1"], "done", expect={"running"}, holder="h:1:a", message=result_message("c1")
    )
    loaded = store.load(thread.id)
    assert [p.call_id for p in loaded.pending] == ["c2"]  # done: it left the pending list
    assert loaded.messages[-1].tool_results[0].content == "inserted"  # with its result
    assert store.list()[0].pending_count == 1
    with pytest.raises(CallAlreadyDecided, match="it is done now"):
        store.update_calls(thread.id, ["c1"], "approved", expect={"pending"})


def test_a_dead_runs_call_is_marked_unknown_by_any_holder(store: Store):
    thread = asking(store, "c1")
    store.update_calls(thread.id, ["c1"], "running", expect={"pending"}, holder="h:1:a")
    store.update_calls(thread.id, ["c1"], "unknown", expect={"running"})  # holder=None: any
    [p] = store.load(thread.id).pending
    assert (p.state, p.holder) == ("unknown", "h:1:a")  # who ran it stays known


def test_done_goes_with_the_result_message(store: Store):
    thread = asking(store, "c1")
    with pytest.raises(ValueError, match="done"):
        store.update_calls(thread.id, ["c1"], "done", expect={"pending"})
    with pytest.raises(ValueError, match="done"):
        store.update_calls(
            thread.id, ["c1"], "rejected", expect={"pending"}, message=result_message("c1")
        )


def test_the_lease_is_one_holder_at_a_time(store: Store):
    thread = asking(store, "c1")
    mine = store.acquire_lease(thread.id, "h:1:a", 30)
    assert mine.holder == "h:1:a" and mine.expires_at > datetime.now(timezone.utc)
    theirs = store.acquire_lease(thread.id, "h:2:b", 30)
    assert theirs == store.load(thread.id).lease and theirs.holder == "h:1:a"  # in the way
    renewed = store.acquire_lease(thread.id, "h:1:a", 60)
    assert renewed.holder == "h:1:a" and renewed.expires_at > mine.expires_at
    taken = store.acquire_lease(thread.id, "h:2:b", 30, replacing="h:1:a")  # found dead
    assert taken.holder == "h:2:b"
    assert not store.release_lease(thread.id, "h:1:a", error="late")  # no longer its own
    assert store.load(thread.id).error is None
    assert store.release_lease(thread.id, "h:2:b", error="The run was interrupted")
    loaded = store.load(thread.id)
    assert loaded.lease is None and loaded.error == "The run was interrupted"
    expired = store.acquire_lease(thread.id, "h:3:c", 0)
    assert store.acquire_lease(thread.id, "h:4:d", 30).holder == "h:4:d" != expired.holder


def test_saving_a_thread_record_keeps_its_lease(store: Store):
    thread = asking(store, "c1")
    store.acquire_lease(thread.id, "h:1:a", 30)
    thread.title = "renamed"
    store.save_thread(thread)
    assert store.load(thread.id).lease.holder == "h:1:a"


def test_a_new_thread_is_made_held_with_its_first_message_in_one_write(store: Store):
    from loom_nb._store import LeasedWrites

    assert isinstance(store, LeasedWrites)  # every store loom_nb ships
    thread = Thread(id="new", agent="a", user_id="ann", title="Hi")
    prompt = Message.user("hi")
    thread.updated_at = prompt.created_at
    store.start(thread, prompt, holder="h:1:a", seconds=30)
    loaded = store.load("new", user_id="ann")
    assert loaded is not None and [m.text for m in loaded.messages] == ["hi"]
    assert loaded.title == "Hi" and loaded.lease is not None and loaded.lease.holder == "h:1:a"
    assert loaded.lease.expires_at > datetime.now(timezone.utc)
    assert store.acquire_lease("new", "h:2:b", 30, user_id="ann").holder == "h:1:a"  # held
    assert [(i.id, i.message_count) for i in store.list(user_id="ann")] == [("new", 1)]
    with pytest.raises(ValueError, match="exists already"):  # nothing of it is written
        store.start(thread, Message.user("again"), holder="h:2:b", seconds=30)
    again = store.load("new", user_id="ann")
    assert [m.text for m in again.messages] == ["hi"] and again.lease.holder == "h:1:a"
    assert store.load("new") is None  # another user's


def test_a_runs_last_message_frees_its_lease_in_the_same_write(store: Store):
    thread = Thread(id="ending", agent="a")
    first = Message.user("hi")
    store.start(thread, first, holder="h:1:a", seconds=30)
    thread.messages.append(first)
    answer = Message.assistant("done")
    thread.updated_at = answer.created_at
    assert store.finish(thread, answer, holder="h:1:a")
    loaded = store.load("ending")
    assert [m.text for m in loaded.messages] == ["hi", "done"]
    assert loaded.lease is None and loaded.error is None and loaded.updated_at == answer.created_at
    # a run whose lease another took: its message is kept, the other's lease stays
    store.acquire_lease("ending", "h:2:b", 30)
    store.release_lease("ending", "h:2:b", error="The run was interrupted")
    store.acquire_lease("ending", "h:2:b", 30)
    assert not store.finish(thread, Message.assistant("late"), holder="h:1:a")
    loaded = store.load("ending")
    assert [m.text for m in loaded.messages] == ["hi", "done", "late"]
    assert loaded.lease.holder == "h:2:b" and loaded.error == "The run was interrupted"
    assert store.finish(thread, Message.assistant("ended"), holder="h:2:b")
    loaded = store.load("ending")
    assert loaded.lease is None and loaded.error is None  # the run ended well


async def test_the_keeper_never_takes_a_thread_back(store: Store):
    from loom_nb._lease import LEASE_SECONDS, ThreadLease

    thread = asking(store, "c1")
    freed = await ThreadLease.acquire(store, thread.id, None)
    freed.release(error=None)
    freed.renew()  # a renewal that raced the run's end
    assert store.load(thread.id).lease is None
    paused = await ThreadLease.acquire(store, thread.id, None)
    paused._renewed_at -= LEASE_SECONDS + 1  # its kernel slept past the lease
    store.acquire_lease(thread.id, DEAD, 30, replacing=paused.holder)  # another run took it
    store.release_lease(thread.id, DEAD, error=None)  # and finished
    paused.renew()
    assert paused.lost and store.load(thread.id).lease is None
    with pytest.raises(ThreadBusy, match="another run took thread"):
        paused.check()
    paused.release(error=None)


# ---- the agent: decisions ------------------------------------------------------------------------


def two_agents(store: Store, log: list[str]):
    """One agent defined twice (a re-run defining cell) on one store."""
    replies = [Reply("", [("write_note", {"text": "hello"})]), "Done."]
    first = define_agent(name="a", model=ReplayModel(replies), tools=[writer(log)], store=store)
    second = define_agent(name="a", model=ReplayModel(["Done."]), tools=[writer(log)], store=store)
    return first, second


def test_a_call_approved_by_two_agent_objects_runs_once(store: Store):
    log: list[str] = []
    first, second = two_agents(store, log)
    stopped = first.run_sync("note hello")
    [pending] = stopped.pending
    done = first.resume_sync(stopped.thread_id, {pending.call_id: True})
    assert done.status == "complete" and log == ["hello"]
    # the README's words: "call X was already decided in another kernel; reload the thread"
    said = f"call {pending.call_id} was already decided in another kernel; reload the thread"
    with pytest.raises(CallAlreadyDecided, match=re.escape(said)) as caught:
        second.resume_sync(stopped.thread_id, {pending.call_id: Decision(True, pending.digest)})
    assert caught.value.state == "done"
    assert log == ["hello"]
    results = [r for r in second.thread(stopped.thread_id).tool_results()]
    assert [(r.call_id, r.approval) for r in results] == [(pending.call_id, "approved")]


def test_a_decision_made_elsewhere_first_wins(store: Store):
    log: list[str] = []
    first, second = two_agents(store, log)
    stopped = first.run_sync("note hello")
    call_id = stopped.pending[0].call_id
    stale = second.thread(stopped.thread_id)  # a card shown before the other kernel decided
    store.update_calls(stopped.thread_id, [call_id], "rejected", expect={"pending"})
    assert stale.pending[0].state == "pending"
    with pytest.raises(CallAlreadyDecided, match="it is rejected now"):
        second.resume_sync(stopped.thread_id, {call_id: True})
    assert log == []


@pytest.mark.parametrize("state", ["approved", "rejected"])
def test_a_call_decided_but_never_claimed_has_a_way_on(store: Store, state: str):
    # Its kernel stopped between the decision and the claim: nothing holds the thread.
    log: list[str] = []
    first, second = two_agents(store, log)
    stopped = first.run_sync("note hello")
    call_id, yes = stopped.pending[0].call_id, state == "approved"
    store.update_calls(stopped.thread_id, [call_id], state, expect={"pending"})
    way = f"%loom {'approve' if yes else 'reject'} {call_id}"
    with pytest.raises(UserError, match="Continue") as refused:  # a new prompt names the way
        second.run_sync("something else", thread_id=stopped.thread_id)
    assert way in str(refused.value) and "approve or reject first" not in str(refused.value)
    with pytest.raises(CallAlreadyDecided, match="has not run yet") as other:  # names the way too
        second.resume_sync(stopped.thread_id, {call_id: not yes})
    assert way in str(other.value) and "has not run yet" in str(other.value)
    assert log == []
    done = second.resume_sync(
        stopped.thread_id, {call_id: Decision(yes, stopped.pending[0].digest)}
    )
    assert done.status == "complete" and log == (["hello"] if yes else [])
    [result] = second.thread(stopped.thread_id).tool_results()
    assert result.approval == state
    with pytest.raises(CallAlreadyDecided, match="its result is saved"):
        second.resume_sync(stopped.thread_id, {call_id: yes})
    assert log == (["hello"] if yes else [])


def test_a_thread_run_elsewhere_is_busy(store: Store):
    agent = define_agent(name="a", model=ReplayModel(["one", "two"]), store=store)
    thread_id = agent.run_sync("hi").thread_id
    store.acquire_lease(thread_id, DEAD, 30)
    with pytest.raises(ThreadBusy, match=f"thread {thread_id} is running in another kernel"):
        agent.run_sync("again", thread_id=thread_id)
    assert len(agent.thread(thread_id).messages) == 2  # nothing was added
    store.acquire_lease(thread_id, DEAD, 0)  # its holder stopped renewing: the lease lapses
    assert agent.run_sync("again", thread_id=thread_id).output == "two"
    assert agent.thread(thread_id).lease is None


def test_a_result_shows_its_thread_free_once_the_run_ended(store: Store):
    agent = define_agent(name="a", model=ReplayModel(["one", "two", "three"]), store=store)
    first = agent.run_sync("hi")
    assert first.thread.lease is None and agent.thread(first.thread_id).lease is None
    assert agent.run_sync("again", thread_id=first.thread_id).thread.lease is None
    store.acquire_lease(first.thread_id, DEAD, 0)  # a lapsed lease, taken over
    assert agent.run_sync("more", thread_id=first.thread_id).thread.lease is None


def test_a_failure_after_the_answer_freed_the_thread_is_still_recorded(store: Store):
    from loom_nb import MessageAdded

    def on_event(event: object) -> None:  # the user's handler fails on the answer
        if isinstance(event, MessageAdded) and event.message.text == "one":
            raise RuntimeError("the handler broke")

    agent = define_agent(name="a", model=ReplayModel(["one", "two"]), store=store)
    with pytest.raises(RuntimeError, match="the handler broke"):
        agent.run_sync("hi", on_event=on_event)
    [info] = agent.threads()
    saved = store.load(info.id)
    assert [m.text for m in saved.messages] == ["hi", "one"]  # the answer was saved
    assert saved.lease is None and saved.error == "RuntimeError: the handler broke"
    assert agent.run_sync("again", thread_id=info.id).output == "two"


def test_a_lease_whose_process_on_this_host_is_gone_is_taken_over_at_once(store: Store):
    agent = define_agent(name="a", model=ReplayModel(["one", "two"]), store=store)
    thread_id = agent.run_sync("hi").thread_id
    host = agent_host()
    store.acquire_lease(thread_id, f"{host}:{dead_pid()}:x", 600)
    assert agent.run_sync("again", thread_id=thread_id).output == "two"


def test_two_runs_of_one_thread_in_one_process_do_not_interleave(store: Store):
    entered, leave = threading.Event(), threading.Event()

    @tool
    def slow() -> str:
        entered.set()
        leave.wait(5)
        return "ok"

    model = ReplayModel([Reply("", [("slow", {})]), "first done", "second"])
    agent = define_agent(name="a", model=model, tools=[slow], store=store)
    first = threading.Thread(target=lambda: agent.run_sync("go"))
    first.start()
    entered.wait(5)
    [info] = agent.threads()
    other = define_agent(name="a", model=ReplayModel(["x"]), store=store)
    with pytest.raises(ThreadBusy, match="this kernel"):
        other.run_sync("meanwhile", thread_id=info.id)
    leave.set()
    first.join(5)
    thread = agent.thread(info.id)
    assert [m.role for m in thread.messages] == ["user", "assistant", "tool", "assistant"]


def test_a_run_whose_lease_was_taken_over_stops_and_appends_nothing_more(
    store: Store, monkeypatch: pytest.MonkeyPatch
):
    from loom_nb import _lease

    monkeypatch.setattr(_lease, "RENEW_SECONDS", 0.05)

    @tool
    def paused(ctx: RunContext) -> str:  # as if the kernel was suspended past the lease
        mine = store.load(ctx.thread_id).lease
        store.acquire_lease(ctx.thread_id, DEAD, 30, replacing=mine.holder)
        time.sleep(0.5)  # the keeper's next renewal finds the thread taken
        return "late"

    model = ReplayModel([Reply("", [("paused", {})]), "never"])
    agent = define_agent(name="a", model=model, tools=[paused], store=store)
    with pytest.raises(ThreadBusy, match=r"another run took thread [\w-]+ over"):
        agent.run_sync("go")
    [info] = agent.threads()
    thread = agent.thread(info.id)
    assert [m.role for m in thread.messages] == ["user", "assistant"]
    assert thread.lease.holder == DEAD  # the other run keeps it


# ---- the agent: unknown outcomes -----------------------------------------------------------------


def killed_mid_write(store: Store, log: list[str]):
    """A thread whose approved write was running when its process died."""
    model = ReplayModel([Reply("", [("write_note", {"text": "hello"})])])
    agent = define_agent(name="a", model=model, tools=[writer(log)], store=store)
    stopped = agent.run_sync("note hello")
    call_id = stopped.pending[0].call_id
    holder = f"{agent_host()}:{dead_pid()}:x"
    store.update_calls(stopped.thread_id, [call_id], "running", expect={"pending"}, holder=holder)
    store.acquire_lease(stopped.thread_id, holder, 600)
    return agent, model, stopped.thread_id, call_id


def test_a_call_whose_run_died_reads_unknown_and_nothing_reruns_without_a_choice(store: Store):
    log: list[str] = []
    agent, model, thread_id, call_id = killed_mid_write(store, log)
    thread = agent.thread(thread_id)
    assert [p.state for p in thread.pending] == ["unknown"]
    assert thread.status == "awaiting_approval"
    with pytest.raises(UserError, match="Approve / Reject no longer apply"):
        agent.resume_sync(thread_id, {call_id: True})
    with pytest.raises(UserError, match=r"outcome of write_note \(call [\w-]+\) is unknown"):
        agent.run_sync("something else", thread_id=thread_id)
    model.add("Noted.")
    waiting = agent.resume_sync(thread_id, {})  # going on without a choice runs nothing
    assert waiting.status == "awaiting_approval" and waiting.pending[0].state == "unknown"
    assert store.load(thread_id).pending[0].state == "unknown"  # recorded by the run
    assert log == []


@pytest.mark.parametrize(
    ("choice", "runs", "seen"),
    [
        ("happened", [], "it took effect"),
        ("failed", [], "it did not take effect"),
        ("retry", ["hello"], "written"),
    ],
)
def test_the_users_choice_for_an_unknown_call(store: Store, choice, runs, seen):
    log: list[str] = []
    agent, model, thread_id, call_id = killed_mid_write(store, log)
    model.add("Noted.")
    done = agent.resume_sync(thread_id, {call_id: choice})
    assert done.status == "complete" and done.output == "Noted."
    assert log == runs
    [result] = [r for r in done.thread.tool_results() if r.call_id == call_id]
    assert seen in result.content and result.approval == "approved"
    assert result.is_error == (choice == "failed")
    sent = model.requests[-1].messages[-1].tool_results[0]
    assert sent.call_id == call_id  # the model hears about it before going on
    with pytest.raises(CallAlreadyDecided, match="it is done now"):
        agent.resume_sync(thread_id, {call_id: "retry"})


def test_a_choice_is_only_for_unknown_calls(store: Store):
    log: list[str] = []
    agent = define_agent(
        name="a",
        model=ReplayModel([Reply("", [("write_note", {"text": "x"})])]),
        tools=[writer(log)],
        store=store,
    )
    stopped = agent.run_sync("go")
    call_id = stopped.pending[0].call_id
    with pytest.raises(UserError, match="waits for approval, nothing ran"):
        agent.resume_sync(stopped.thread_id, {call_id: "happened"})
    with pytest.raises(UserError, match="'maybe' is not a choice"):
        agent.resume_sync(stopped.thread_id, {call_id: "maybe"})


# ---- helpers -------------------------------------------------------------------------------------


def agent_host() -> str:
    return socket.gethostname()


@functools.cache
def dead_pid() -> int:
    """The pid of a process that has ended (and was reaped)."""
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    return int(child.stdout)
