"""Questions and rules across real processes sharing one store (SQLite file, PostgreSQL): a
question waits through a SIGKILL and is answered once by whichever kernel is first; a rule in
the store is honoured by every kernel, and revoking it in one stops the other's next
automatic approval."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from loom_nb import ReplayModel, Reply, define_agent, tool
from tests.stores._processes import OPEN_STORE, open_target

# A kernel: the analyst agent (a question tool, and a write that needs approval whose side
# effect is a line in a file), on the store of argv[1]; argv[2] is the side file.
_KERNEL = (
    OPEN_STORE
    + """
import os, time
from loom_nb import CallAlreadyDecided, ReplayModel, Reply, ThreadBusy, define_agent, tool

side = sys.argv[2]

@tool(needs_approval=True)
def write_ticket(key: str) -> str:
    "File a ticket (the write)."
    with open(side, "a") as f:
        f.write(key + "\\n")
    return "filed " + key

CHOICES = ["fiscal", "calendar"]
ASK = Reply("", [("ask_user", {"question": "fiscal or calendar?", "choices": CHOICES})])
WRITE = Reply("", [("write_ticket", {"key": os.path.basename(side) + str(os.getpid())})])
agent = define_agent(name="analyst", model=ReplayModel([ASK, WRITE, "Done."] + ["Done."] * 50),
                     tools=[write_ticket], store=store)
"""
)


def kernel(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _KERNEL + textwrap.dedent(code), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_question_survives_sigkill_and_is_answered_once_by_racing_kernels(
    target: str, tmp_path: Path
):
    asking = kernel(
        """
        first = agent.run_sync("sales last quarter?")
        print(first.thread_id, first.pending[0].call_id, first.pending[0].tool, flush=True)
        time.sleep(600)  # the kernel waits with its question; it is killed here
        """,
        target,
        str(tmp_path / "side"),
    )
    assert asking.stdout is not None
    line = asking.stdout.readline()
    assert line, asking.stderr.read() if asking.stderr else ""
    thread_id, call_id, tool_name = line.split()
    assert tool_name == "ask_user"
    asking.send_signal(signal.SIGKILL)
    asking.wait()
    go = tmp_path / "go"
    racers = [
        kernel(
            f"""
            agent.model = ReplayModel([WRITE, "Done."])  # this kernel's model goes on
            while not os.path.exists({str(go)!r}):
                time.sleep(0.001)
            try:
                done = agent.resume_sync({thread_id!r}, {{{call_id!r}: "fiscal"}})
                print("answered", done.status)
            except CallAlreadyDecided:
                print("decided elsewhere")
            except ThreadBusy:
                print("busy")
            """,
            target,
            str(tmp_path / f"side{i}"),
        )
        for i in range(2)
    ]
    time.sleep(1.5)  # both imported and waiting
    go.touch()
    said = sorted(r.communicate(timeout=120)[0].strip() for r in racers)
    assert said[0].startswith("answered") and said[1] in ("busy", "decided elsewhere"), said
    store = open_target(target)
    thread = store.load(thread_id)
    store.close()
    assert thread is not None
    answers = [r for m in thread.messages for r in m.tool_results if r.name == "ask_user"]
    assert [a.content for a in answers] == ["fiscal"]  # answered once, the run went on once
    assert thread.pending[0].tool == "write_ticket"  # the winner's next turn: one write card


def test_two_kernels_honour_one_rule_and_a_revocation_in_one_stops_the_other(
    target: str, tmp_path: Path
):
    @tool(needs_approval=True)
    def write_ticket(key: str) -> str:
        "File a ticket (the write)."
        raise AssertionError("the kernels run it, not this process")

    store = open_target(target)
    here = define_agent(
        name="analyst",
        model=ReplayModel([Reply("", [("write_ticket", {"key": "x"})]), "Rejected, so."]),
        tools=[write_ticket],
        store=store,
    )
    first = here.run_sync("start")
    rule = here.allow(tool="write_ticket", thread_id=first.thread_id)
    here.resume_sync(first.thread_id, {first.pending[0].call_id: False})
    run_one = """
        agent.model = ReplayModel([WRITE, "Done."])
        done = agent.run_sync("file one", thread_id=sys.argv[3])
        print(done.status, [r.approval for m in done.new_messages for r in m.tool_results])
        """
    sides = [tmp_path / f"side{i}" for i in range(3)]
    for side in sides[:2]:  # two kernels, each approved by the rule in the store
        out, err = kernel(run_one, target, str(side), first.thread_id).communicate(timeout=120)
        assert out.strip() == "complete ['rule']", err
        assert side.read_text().count("\n") == 1
    assert rule.revoke() is True  # revoked here, in a third kernel
    out, err = kernel(run_one, target, str(sides[2]), first.thread_id).communicate(timeout=120)
    assert out.strip() == "awaiting_approval []", err
    assert not sides[2].exists()  # it waits for a person; nothing was written
    store.close()
