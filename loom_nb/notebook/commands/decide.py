"""``%loom approve CALL_ID...`` / ``%loom reject CALL_ID...``: decide, then resume in this cell.

For terminal IPython and scripts, where there are no buttons, and for a card whose buttons
are gone (an old output after a restart). ``%loom resolve`` comes here with its choice.
"""

from __future__ import annotations

from IPython.core.error import UsageError

from loom_nb import _loop_thread
from loom_nb._agent import Decision, DecisionLike, RunResult
from loom_nb._ask import is_question
from loom_nb._errors import RunError, UserError
from loom_nb._messages import Resolution
from loom_nb.notebook import _runs
from loom_nb.notebook._html import AFTER, preview_note
from loom_nb.notebook.session import RunFailed, RunInterrupted, Session, usage_errors


def run(session: Session, call_ids: list[str], *, approve: bool | Resolution | str) -> RunResult:
    """Approve (or reject) ``call_ids``, all of one thread, and show the resumed run; for
    calls whose outcome is unknown, ``approve`` is the user's Resolution instead, and for a
    question (``ask_user``) the answer's text."""
    call_ids = list(dict.fromkeys(call_ids))
    by_call = {p.call_id: (a, t, p) for a, t in session.pending() for p in t.pending}
    missing = [c for c in call_ids if c not in by_call]
    if missing:
        known = " ".join(by_call) or "none"
        decided = _decided_in(session, missing[0])
        if decided is not None:
            raise UsageError(
                f"no call {missing[0]!r} waits for approval: call {missing[0]} was already "
                "decided in another kernel (or earlier in this one); see what came of it with "
                f"%loom show {decided}"
            )
        raise UsageError(f"no call {missing[0]!r} waits for approval; waiting: {known}")
    if len({by_call[c][1].id for c in call_ids}) > 1:
        raise UsageError("these calls belong to different threads: decide one thread at a time")
    unknown = [c for c in call_ids if by_call[c][2].state == "unknown"]
    if isinstance(approve, bool) and unknown:
        raise UsageError(
            f"the outcome of call {unknown[0]} is unknown (its kernel stopped while it ran; the "
            f"write may have happened): choose with %loom resolve {unknown[0]} "
            "happened|retry|failed"
        )
    agent, thread, _ = by_call[call_ids[0]]
    session.claim(call_ids)
    question = is_question(by_call[call_ids[0]][2])
    word = (
        "answer"
        if question
        else "resolve"
        if isinstance(approve, str)
        else "approve"
        if approve
        else "reject"
    )
    for shown in list(session.views):
        shown.mark_decided(call_ids, approve, f"decided with %loom {word}")
    decisions: dict[str, DecisionLike] = {
        c: Decision(approve, by_call[c][2].digest) if isinstance(approve, bool) else approve
        for c in call_ids
    }
    view = _runs.open_view(session, agent)
    view.show()
    view.thread_id = thread.id
    resumed = _runs.resume(session, agent, view, thread.id, decisions, session.context())
    try:
        with usage_errors():
            result = _loop_thread.run_sync(resumed)
    except RunError as exc:
        raise RunFailed(f"{agent.name}: {exc}", result=exc.result) from None
    except KeyboardInterrupt:
        raise RunInterrupted(
            f"{agent.name}'s resumed run was interrupted; what completed is saved in thread "
            f"{thread.id}"
        ) from None
    ran = {r.call_id for m in result.new_messages for r in m.tool_results if not r.is_error}
    for c in call_ids:  # where an approved change lives, e.g. a DataFrame in memory only
        after = preview_note(by_call[c][2].preview, AFTER)
        if approve and after and c in ran:
            print(f"ℹ {c}: {after}")
    return result


def _decided_in(session: Session, call_id: str) -> str | None:
    """The current thread (of an agent here) that holds ``call_id`` as a call already decided."""
    for agent in session.unique_agents():
        thread_id = session.current.get(agent.name)
        if thread_id is None:
            continue
        try:
            thread = agent.thread(thread_id, context=session.context())
        except UserError:
            continue
        if any(c.id == call_id for m in thread.messages for c in m.tool_calls):
            return thread_id
    return None
