"""The run around a call that needs approval, in one process: the approval turn is saved with
its cards, Ctrl-C waits a bounded time for an approved write, and user code stays off the loop
(the store contract's steps are in tests/stores/test_call_lifecycle.py)."""

from __future__ import annotations

import os
import signal
import threading
import time
import warnings

import pytest

from loom_nb import (
    FunctionModel,
    Message,
    ReplayModel,
    Reply,
    Store,
    define_agent,
    memory_store,
    tool,
)
from tests.stores._threads import writer

# ---- no window without a card --------------------------------------------------------------------


class Spy:
    """A store that records what each ``append`` saved with its message."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.appends: list[tuple[Message, object]] = []

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def append(self, thread, message, *, pending=None):
        self.appends.append((message, pending))
        self.inner.append(thread, message, pending=pending)

    def start(self, thread, message, *, holder, seconds):  # a new thread's first message
        self.appends.append((message, None))
        self.inner.start(thread, message, holder=holder, seconds=seconds)


def test_the_message_asking_for_approval_is_saved_with_its_pending_calls():
    spy = Spy(memory_store())
    model = ReplayModel([Reply("Writing.", [("write_note", {"text": "x"})])])
    agent = define_agent(name="a", model=model, tools=[writer([])], store=spy)  # type: ignore[arg-type]
    agent.run_sync("go")
    [(user, none), (assistant, pending)] = spy.appends
    assert (user.role, none) == ("user", None)
    assert assistant.tool_calls[0].name == "write_note"
    assert [(p.tool, p.preview) for p in pending] == [("write_note", {"will_write": "x"})]


# ---- interrupts and the loop ---------------------------------------------------------------------


def interrupt_when(event: threading.Event) -> None:
    """Ctrl-C (SIGINT to this process) once ``event`` is set."""
    threading.Thread(
        target=lambda: event.wait(5) and os.kill(os.getpid(), signal.SIGINT), daemon=True
    ).start()


@pytest.mark.parametrize(("seconds", "state"), [(0.3, "done"), (5.0, "unknown")])
def test_ctrl_c_waits_a_bounded_time_for_an_approved_write(seconds, state, capfd):
    started = threading.Event()
    log: list[str] = []

    @tool(needs_approval=True)
    def write(text: str) -> str:
        started.set()
        time.sleep(seconds)
        log.append(text)
        return "written"

    store = memory_store()
    model = ReplayModel([Reply("", [("write", {"text": "x"})]), "never"])
    agent = define_agent(name="a", model=model, tools=[write], store=store, interrupt_wait=1.0)
    stopped = agent.run_sync("go")
    call_id = stopped.pending[0].call_id
    interrupt_when(started)
    begun = time.monotonic()
    with pytest.raises(KeyboardInterrupt, match=r"^$"):  # Ctrl-C's own, with no words
        agent.resume_sync(stopped.thread_id, {call_id: True})
    waited = time.monotonic() - begun
    assert waited < 1.0 + 1.0
    assert "waiting up to 1 s for write to finish" in capfd.readouterr().err
    thread = agent.thread(stopped.thread_id)
    assert "interrupted" in (thread.error or "")
    if state == "done":
        assert log == ["x"] and thread.pending == []
        assert [r.content for r in thread.tool_results()] == ["written"]
    else:
        assert [p.state for p in thread.pending] == ["unknown"]
        assert list(thread.tool_results()) == []
    assert thread.messages[-1].role == ("tool" if state == "done" else "assistant")


def test_a_blocking_async_tool_is_named_in_a_warning():
    @tool
    async def stuck() -> str:
        time.sleep(1.6)
        return "late"

    agent = define_agent(
        name="a", model=ReplayModel([Reply("", [("stuck", {})]), "ok"]), tools=[stuck]
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        agent.run_sync("go")
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert any("tool 'stuck' has blocked loom_nb's event loop" in m for m in messages), messages


def test_sync_model_functions_run_off_the_loop():
    seen: list[str] = []

    def answer(request) -> str:
        seen.append(threading.current_thread().name)
        return "hi"

    agent = define_agent(name="a", model=FunctionModel(answer))
    assert agent.run_sync("hello").output == "hi"
    assert seen and seen[0] != "loom-nb-loop"
