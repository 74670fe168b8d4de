"""SIGKILL at every step between Approve (or Reject) and the saved result, on SQLite and
PostgreSQL, with real processes: the kernel kills itself right after the step (a real
SIGKILL, at an exact point). A fresh kernel then reloads the thread, builds the call's card and
does what the card offers, as a user would: every call reaches done, and no write runs twice.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from loom_nb import ReplayModel, Reply, define_agent
from tests.stores._processes import OPEN_STORE, open_target, ticket_writer

pytestmark = pytest.mark.slow

_KERNEL = (
    OPEN_STORE
    + """
import os, signal
from loom_nb import ReplayModel, define_agent

side, thread_id, call_id, approve, step = sys.argv[2:7]

def die():
    os.kill(os.getpid(), signal.SIGKILL)

update_calls, acquire_lease = store.update_calls, store.acquire_lease

def killing_update(thread_id, call_ids, state, **kw):
    if state == "done" and step == "tool returned":
        die()  # the tool returned; its result is not saved yet
    update_calls(thread_id, call_ids, state, **kw)
    if (state, step) in (("rejected", "decision saved"), ("running", "decided and claimed"),
                         ("done", "result saved")):
        die()

def killing_lease(*args, **kw):
    lease = acquire_lease(*args, **kw)
    if step == "lease taken":
        die()
    return lease

store.update_calls, store.acquire_lease = killing_update, killing_lease
agent = define_agent(name="support", model=ReplayModel(["Filed."] * 3),
                     tools=[ticket_writer(side)], store=store)
agent.resume_sync(thread_id, {call_id: approve == "approve"})
print("not killed")
"""
)


# The order of the steps: the lease first, then the decision (an approval with its claim, in
# one transaction), the tool, its result with "done".
APPROVED = ["lease taken", "decided and claimed", "tool returned", "result saved"]
REJECTED = ["lease taken", "decision saved", "result saved"]


def test_a_kill_at_any_step_after_approve_leaves_a_way_on_and_runs_nothing_twice(
    tmp_path: Path, target: str
):
    from loom_nb.notebook.cards import ApprovalCard

    kind = "postgres" if target.startswith("postgresql") else "sqlite"
    side = tmp_path / "side.log"
    trials = [("approve", s) for s in APPROVED] + [("reject", s) for s in REJECTED]
    store = open_target(target)
    replies = [Reply("", [("write_ticket", {"key": f"k{i}"})]) for i in range(len(trials))]
    agent = define_agent(
        name="support",
        model=ReplayModel(replies + ["Done."] * len(trials)),
        tools=[ticket_writer(side)],
        store=store,
    )
    calls = []
    for i in range(len(trials)):
        first = agent.run_sync(f"ticket {i}")
        calls.append((first.thread_id, first.pending[0].call_id))
    for (decision, step), (thread_id, call_id) in zip(trials, calls, strict=True):
        child = subprocess.run(
            [
                sys.executable,
                "-c",
                textwrap.dedent(_KERNEL),
                target,
                str(side),
                thread_id,
                call_id,
                decision,
                step,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert child.returncode == -9, (step, child.stdout, child.stderr)

    # A fresh kernel (this process): each card offers a way on, and taking it ends in done.
    effects_before = Counter(side.read_text().splitlines()) if side.exists() else Counter()
    report = []
    for i, ((decision, step), (thread_id, call_id)) in enumerate(zip(trials, calls, strict=True)):
        thread = agent.thread(thread_id)
        found = {p.call_id: p for p in thread.pending}.get(call_id)
        offered: list[str] = []
        if found is not None:
            card = ApprovalCard(found, thread_id=thread_id, others_waiting=False)
            offered = card.offers()
            assert offered, (step, found.state)  # never a card without a way on
            if "continue" in offered:
                agent.resume_sync(thread_id, {call_id: found.state == "approved"})
            elif "approve" in offered:
                agent.resume_sync(thread_id, {call_id: decision == "approve"})
            else:  # unknown: the user checks where it writes, then says what they found
                ran = effects_before[f"effect k{i}"] > 0
                assert offered == ["happened", "retry", "failed"]
                agent.resume_sync(thread_id, {call_id: "happened" if ran else "retry"})
        after = agent.thread(thread_id)
        report.append((decision, step, found.state if found else "done", offered))
        assert after.status == "complete" and after.pending == [], (step, after.pending)
        assert [r.call_id for r in after.tool_results()].count(call_id) == 1
    store.close()
    effects = Counter(side.read_text().splitlines()) if side.exists() else Counter()
    print(f"\n{kind}: after the kill, (decision, step, state, card offers): {report}")
    print(f"{kind}: effects {dict(effects)}")
    for i, (decision, _) in enumerate(trials):
        assert effects[f"effect k{i}"] == (1 if decision == "approve" else 0)  # never twice
    states = {(d, step): state for d, step, state, _ in report}
    assert states["approve", "lease taken"] == "pending"  # nothing decided yet: Approve again
    assert states["approve", "decided and claimed"] == "unknown"  # never approved, unclaimed
    assert states["approve", "tool returned"] == "unknown"
    assert states["reject", "lease taken"] == "pending"
    assert states["reject", "decision saved"] == "rejected"  # Continue
    assert states["approve", "result saved"] == states["reject", "result saved"] == "done"
