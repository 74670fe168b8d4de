"""An agent keeps the threads it runs: the next turn appends instead of loading the thread,
and whatever changed the thread elsewhere (another kernel, a deletion) is still seen."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from loom_nb import (
    FunctionModel,
    ReplayModel,
    Reply,
    Store,
    UserError,
    define_agent,
    memory_store,
    tool,
)
from loom_nb.models import ModelRequest
from loom_nb.sqlite import SQLiteStore, sqlite_store
from tests.stores._processes import OPEN_STORE


def _echo(request: ModelRequest) -> str:
    return f"heard {len(request.messages)}"


def _recording(seen: list[list[str]], answer: str) -> FunctionModel:
    """A model that answers ``answer`` and notes in ``seen`` the texts each request held."""

    def model(request: ModelRequest) -> str:
        seen.append([m.text for m in request.messages])
        return answer

    return FunctionModel(model)


@pytest.fixture
def store(tmp_path: Path):
    s = sqlite_store(tmp_path / "loom.db")
    yield s
    s.close()


@pytest.fixture(params=["sqlite", "memory", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_store(request: pytest.FixtureRequest, tmp_path: Path):
    if request.param == "postgres":
        from loom_nb.postgres import postgres_store

        database = request.getfixturevalue("loom_database")
        s: Store = postgres_store(database.dsn(), schema=request.getfixturevalue("postgres_schema"))
    else:
        s = sqlite_store(tmp_path / "loom.db") if request.param == "sqlite" else memory_store()
    yield s
    s.close()


def _counting_loads(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    loads: list[str] = []
    real = store.load

    def load(thread_id: str, **kw: object) -> object:
        loads.append(thread_id)
        return real(thread_id, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "load", load)
    return loads


def test_the_next_turn_on_a_thread_does_not_load_it(
    any_store: Store, monkeypatch: pytest.MonkeyPatch
):
    store = any_store
    agent = define_agent(name="a", model=FunctionModel(_echo), store=store)
    first = agent.run_sync("one")
    loads = _counting_loads(store, monkeypatch)
    second = agent.run_sync("two", thread_id=first.thread_id)
    third = agent.run_sync("three", thread_id=first.thread_id)
    assert loads == []
    assert (second.output, third.output) == ("heard 3", "heard 5")
    assert [m.text for m in agent.thread(first.thread_id).messages][-2:] == ["three", "heard 5"]
    # each result keeps the thread as its run left it
    assert len(first.thread.messages) == 2 and len(second.thread.messages) == 4


def test_a_thread_changed_elsewhere_is_loaded_again(
    any_store: Store, monkeypatch: pytest.MonkeyPatch
):
    store = any_store
    agent = define_agent(name="a", model=FunctionModel(_echo), store=store)
    other = define_agent(name="a", model=FunctionModel(lambda r: "other"), store=store)
    thread_id = agent.run_sync("one").thread_id
    other.run_sync("from the other agent", thread_id=thread_id)
    loads = _counting_loads(store, monkeypatch)
    result = agent.run_sync("two", thread_id=thread_id)
    assert loads == [thread_id]
    assert result.output == "heard 5"  # its model saw the other agent's turn


def test_a_deleted_thread_is_not_found_even_when_kept(any_store: Store):
    from loom_nb import ThreadNotFound

    store = any_store
    agent = define_agent(name="a", model=FunctionModel(_echo), store=store)
    thread_id = agent.run_sync("one").thread_id
    store.delete(thread_id)
    with pytest.raises(ThreadNotFound, match="no thread"):
        agent.run_sync("two", thread_id=thread_id)


def test_a_thread_deleted_and_made_again_elsewhere_is_the_one_the_next_turn_sees(
    any_store: Store,
):
    from loom_nb import Message, Thread

    store = any_store
    seen: list[list[str]] = []
    agent = define_agent(name="a", model=_recording(seen, "ok"), store=store)
    thread_id = agent.run_sync("one").thread_id
    store.delete(thread_id)  # another kernel deletes it and writes a thread of the same id,
    again = Thread(id=thread_id, agent="a")  # as many messages, as many writes
    store.save_thread(again)
    for m in (Message.user("remade"), Message.assistant("anew")):
        again.messages.append(m)
        store.append(again, m)
    agent.run_sync("two", thread_id=thread_id)
    assert seen[-1] == ["remade", "anew", "two"]


def test_a_refused_decision_leaves_the_kept_thread_undecided(store: SQLiteStore):
    @tool(needs_approval=True)
    def refund(invoice: str) -> str:
        """Refund an invoice."""
        return f"refunded {invoice}"

    model = ReplayModel([Reply("", [("refund", {"invoice": "A"})]), "Done."])
    agent = define_agent(name="a", model=model, tools=[refund], store=store)
    waiting = agent.run_sync("Refund A.")
    call_id = waiting.pending[0].call_id
    with pytest.raises(UserError, match="no pending call 'nope'"):
        agent.resume_sync(waiting.thread_id, {call_id: True, "nope": True})
    assert agent.thread(waiting.thread_id).pending[0].decision is None
    done = agent.resume_sync(waiting.thread_id, {call_id: False})
    assert done.output == "Done." and done.thread.messages[-2].tool_results[0].approval == (
        "rejected"
    )


def test_a_decision_reads_the_thread_once(store: SQLiteStore, monkeypatch: pytest.MonkeyPatch):
    @tool(needs_approval=True)
    def refund(invoice: str) -> str:
        """Refund an invoice."""
        return f"refunded {invoice}"

    model = ReplayModel(
        [Reply("", [("refund", {"invoice": "A"}), ("refund", {"invoice": "B"})]), "Done."]
    )
    agent = define_agent(name="a", model=model, tools=[refund], store=store)
    waiting = agent.run_sync("Refund A and B.")
    first, second = (p.call_id for p in waiting.pending)
    loads = _counting_loads(store, monkeypatch)
    half = agent.resume_sync(waiting.thread_id, {first: True})
    assert half.status == "awaiting_approval" and [p.state for p in half.pending] == [
        "approved",
        "pending",
    ]
    done = agent.resume_sync(waiting.thread_id, {second: False})
    assert done.output == "Done." and [r.approval for r in done.thread.tool_results()] == [
        "approved",
        "rejected",
    ]
    assert loads == [waiting.thread_id] * 2  # each decision changed it: read once, not per step
    assert half.pending[0].state == "approved"  # a result keeps the thread as it was then


def test_test_models_keep_each_request_without_a_copy_of_the_thread(store: SQLiteStore):
    model = FunctionModel(_echo)
    agent = define_agent(name="a", model=model, store=store)
    thread_id = agent.run_sync("turn 0").thread_id
    for i in range(1, 30):
        agent.run_sync(f"turn {i}", thread_id=thread_id)
    first, last = model.requests[0].messages, model.requests[-1].messages
    assert [m.text for m in first] == ["turn 0"]  # what the first turn was given, still
    assert len(last) == 59 and last[-1].text == "turn 29" and last[0].text == "turn 0"
    assert sys.getsizeof(last) == sys.getsizeof(first)  # no per-turn copy of the thread


_OTHER_KERNEL = (
    OPEN_STORE
    + """
from loom_nb import FunctionModel, define_agent
from loom_nb.sqlite import sqlite_store
store = sqlite_store(sys.argv[1])
agent = define_agent(name="a", model=FunctionModel(lambda r: "from the other kernel"), store=store)
agent.run_sync("a turn in another kernel", thread_id=sys.argv[2])
store.close()
"""
)


def test_another_kernels_turn_is_seen(tmp_path: Path):
    path = tmp_path / "loom.db"
    store = sqlite_store(path)
    seen: list[list[str]] = []
    agent = define_agent(name="a", model=_recording(seen, "here"), store=store)
    thread_id = agent.run_sync("first").thread_id
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_OTHER_KERNEL), str(path), thread_id],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    agent.run_sync("again", thread_id=thread_id)
    assert seen[-1] == [
        "first",
        "here",
        "a turn in another kernel",
        "from the other kernel",
        "again",
    ]
    store.close()


def test_a_call_an_interrupted_run_left_open_gets_a_result_on_the_next_turn(store: SQLiteStore):
    from loom_nb import Message, Thread, ToolCall

    thread = Thread(id="t", agent="a")
    store.save_thread(thread)
    for message in [
        Message.user("Look it up."),
        Message("assistant", [ToolCall("call_1", "lookup", {"q": "x"})]),  # then the kernel died
    ]:
        thread.messages.append(message)
        store.append(thread, message)
    seen: list[ModelRequest] = []
    agent = define_agent(
        name="a", model=FunctionModel(lambda r: seen.append(r) or "ok"), store=store
    )
    agent.run_sync("Again?", thread_id="t")
    closing = seen[0].messages[2]
    assert closing.role == "tool" and closing.tool_results[0].call_id == "call_1"
    assert "interrupted" in closing.tool_results[0].content
    assert seen[0].messages[3].text == "Again?"


_KERNEL = (
    OPEN_STORE
    + """
from loom_nb import FunctionModel, Message, Reply, Thread, define_agent, tool


@tool(needs_approval=True)
def write(text: str) -> str:
    "Write text."
    return "wrote " + text

def model(request):
    return "from the other kernel"

agent = define_agent(name="a", model=FunctionModel(model), tools=[write], store=store)
for line in sys.stdin:  # one command per line, as cells run one after another
    command, thread_id, *rest = line.split()
    if command == "turn":
        agent.run_sync("a turn in another kernel", thread_id=thread_id)
    elif command in ("approve", "reject"):
        agent.resume_sync(thread_id, {rest[0]: command == "approve"})
    elif command == "rename":
        thread = store.load(thread_id)
        thread.title = rest[0]
        store.save_thread(thread)
    elif command == "remake":
        agent.delete_thread(thread_id)
        again = Thread(id=thread_id, agent="a")
        store.save_thread(again)
        for m in (Message.user("remade"), Message.assistant("anew")):
            again.messages.append(m)
            store.append(again, m)
    print("done", flush=True)
"""
)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_what_another_kernel_does_to_a_kept_thread_is_seen(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
):
    if kind == "postgres":
        from loom_nb.postgres import postgres_store

        database, schema = (
            request.getfixturevalue(f) for f in ("loom_database", "postgres_schema")
        )
        where, store = f"{database.dsn()}#{schema}", postgres_store(database.dsn(), schema=schema)
    else:
        where, store = str(tmp_path / "loom.db"), sqlite_store(tmp_path / "loom.db")
    seen: list[list[str]] = []

    def model(request: ModelRequest) -> str | Reply:
        seen.append(
            [m.text or ",".join(r.content for r in m.tool_results) for m in request.messages]
        )
        last = request.messages[-1].text
        return Reply("", [("write", {"text": last})]) if last.startswith("write") else "here"

    @tool(needs_approval=True)
    def write(text: str) -> str:
        "Write text."
        raise AssertionError("the other kernel decides, and runs it")

    agent = define_agent(name="a", model=FunctionModel(model), tools=[write], store=store)
    other = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_KERNEL), where],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def elsewhere(*command: str) -> None:
        assert other.stdin is not None and other.stdout is not None
        other.stdin.write(" ".join(command) + "\n")
        other.stdin.flush()
        assert other.stdout.readline() == "done\n", other.communicate(timeout=30)[1]

    try:
        thread_id = agent.run_sync("first").thread_id
        elsewhere("turn", thread_id)
        agent.run_sync("again", thread_id=thread_id)
        assert seen[-1][-3:] == ["a turn in another kernel", "from the other kernel", "again"]

        for decision, outcome in (("approve", "wrote write a"), ("reject", "")):
            waiting = agent.run_sync("write a", thread_id=thread_id)
            elsewhere(decision, thread_id, waiting.pending[0].call_id)
            after = agent.run_sync(f"after {decision}", thread_id=thread_id)
            assert after.status == "complete" and after.thread.pending == []
            assert seen[-1][-2:] == ["from the other kernel", f"after {decision}"]
            if outcome:
                assert seen[-1][-3] == outcome

        elsewhere("rename", thread_id, "Renamed")
        assert agent.run_sync("named?", thread_id=thread_id).thread.title == "Renamed"

        elsewhere("remake", thread_id)
        agent.run_sync("two", thread_id=thread_id)
        assert seen[-1] == ["remade", "anew", "two"]
    finally:
        assert other.stdin is not None
        other.stdin.close()
        other.wait(30)
        store.close()
