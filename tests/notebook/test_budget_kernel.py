"""A budget pause in real kernels: the card is saved, the kernel is killed, a new kernel on the
same store shows the card, and Continue goes on once."""

from __future__ import annotations

import signal
import textwrap
import time
from pathlib import Path

import pytest

from tests.notebook.nb_kernels import Kernel, printed

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

SETUP = """
%load_ext loom_nb
from loom_nb import define_agent, tool, FunctionModel, Reply, Usage
from loom_nb.sqlite import sqlite_store

@tool
def lookup(key: str) -> str:
    "Look a key up."
    return "value of " + key

def script(request):
    if sum(m.role == "tool" for m in request.messages) >= 3:  # the 4th turn of the thread
        return Reply("All looked up.", usage=Usage(1000, 0, 1))
    return Reply("", [("lookup", {{"key": "k"}})], usage=Usage(1000, 0, 1))

model = FunctionModel(script)
agent = define_agent(name="a", model=model, tools=[lookup], store=sqlite_store({db!r}),
                     budget={{"tokens": 2500}})
"""


def test_the_budget_card_survives_a_killed_kernel_and_continue_goes_on_once(
    kernel: tuple[str, Path], tmp_path: Path
) -> None:
    setup = SETUP.format(db=str(tmp_path / "loom.db"))
    first = Kernel(kernel, tmp_path)
    try:
        reply, _ = first.run(setup)
        assert reply["status"] == "ok", reply
        reply, out = first.run("%%loom agent --result r\nLook it up.\n")
        assert reply["status"] == "ok", reply
        reply, out = first.run(
            "print(r.status, r.thread.id, r.pending[0].tool, len(model.requests))"
        )
        status, thread_id, tool, requests = printed(out).split()
        assert (status, tool, requests) == ("awaiting_approval", "budget", "2")
        first.km.signal_kernel(signal.SIGKILL)  # nothing more is written by this kernel
        deadline = time.monotonic() + 30
        while first.km.is_alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not first.km.is_alive()
    finally:
        first.close()

    second = Kernel(kernel, tmp_path)
    try:
        reply, _ = second.run(setup)
        assert reply["status"] == "ok", reply
        reply, _ = second.run(f"%loom resume {thread_id}")
        assert reply["status"] == "ok", reply
        reply, out = second.run(
            textwrap.dedent("""
            from loom_nb.notebook import session
            view = session().last_view
            [card] = view.cards
            print(card.approve_button.description, card.reject_button.description)
            print("used 2,000 tokens of 2,500 tokens" in card.preview.value)
            card.approve_button.click()
            card.approve_button.click()   # a double click continues once
            result = view.wait(30)
            print(result.status, len(model.requests), result.output)
            print(card.approve_button.disabled)
            """)
        )
        lines = printed(out).splitlines()
        assert lines[0] == "Continue Stop"
        assert lines[1] == "True"
        assert lines[2] == "complete 2 All looked up."  # 2 more turns here: 4,000 of 5,000
        assert lines[3] == "True"
    finally:
        second.close()
