"""``%%loom [AGENT] ...``: send the cell to the agent and show the thread as it streams."""

from __future__ import annotations

from IPython.core.error import UsageError

from loom_nb._agent import Agent, RunResult
from loom_nb._errors import RunError, ThreadNotFound, ThreadWaiting
from loom_nb._user_errors import origin
from loom_nb.notebook import _runs
from loom_nb.notebook.session import Binding, RunFailed, Session, usage_errors


def run(
    session: Session,
    agent_name: str | None,
    prompt: str,
    *,
    new: bool,
    thread_id: str | None,
    binding: Binding,
) -> RunResult | None:
    """Run ``prompt`` on the agent's current thread (a new one with ``new``, or
    ``thread_id``); blocks the cell until the run ends, then assigns ``binding``'s names.
    The cell whose run waits for a decision, run again, shows its thread and card again
    (None) rather than sending its message twice."""
    agent = session.agent(agent_name)
    tid = None if new else thread_id or session.current.get(agent.name)
    if tid is not None:  # the cell's one check, before it shows a view; the run loads it once
        with usage_errors():
            try:
                agent.check_thread(tid, context=session.context())
            except ThreadNotFound:
                if thread_id is not None:
                    raise
                session.lost_thread(agent, tid)
                tid = None
            except ThreadWaiting as exc:
                if _asked_last(agent, tid, prompt, session):  # this cell, run again
                    _show_waiting(session, agent, tid, binding)
                    return None
                raise UsageError(_waiting(exc)) from None
    session.last_agent = agent.name
    view = _runs.open_view(session, agent, binding)
    view.show()
    view.begin()
    followed = _runs.Followed(view, tid)
    try:
        with usage_errors():
            result = agent.run_sync(
                prompt, thread_id=tid, context=session.context(), on_event=followed
            )
    except RunError as exc:
        failed: RunResult | None = exc.result
        _runs.finish(session, agent, view, failed, exc, followed.thread_id)
        stop = RunFailed(f"{agent.name}: {exc}", result=failed)
        cause = origin(exc)
        stop.user_error = None if cause is exc else cause  # the user's code raised it
        raise stop from None
    except KeyboardInterrupt:
        stop = _runs.interrupted(session, agent, followed)
        _runs.finish(session, agent, view, None, stop, followed.thread_id)
        raise stop from None
    except BaseException as exc:
        _runs.finish(session, agent, view, None, exc, followed.thread_id)
        raise
    _runs.finish(session, agent, view, result, None)
    _runs.bind(session, binding, result)
    return result


def _asked_last(agent: Agent, tid: str, prompt: str, session: Session) -> bool:
    """Whether ``prompt`` is the thread's last user message (the same cell, run again)."""
    with usage_errors():
        thread = agent.thread(tid, context=session.context())
    asked = [m.text for m in thread.messages if m.role == "user"]
    return bool(asked) and asked[-1].strip() == prompt.strip()


def _show_waiting(session: Session, agent: Agent, tid: str, binding: Binding) -> None:
    """The thread drawn again, its cards live, with a line saying nothing was sent."""
    print(
        "This message waits for your decision on the card below; it was not sent again "
        "(decide, then run the cell again for a new answer, or use --new)."
    )
    with usage_errors():
        thread = agent.thread(tid, context=session.context())
    view = _runs.open_view(session, agent, binding)  # its card's run binds the cell's names
    view.show()
    view.render(thread)


def _waiting(exc: ThreadWaiting) -> str:
    """What a new message to a thread whose calls wait is told: how to decide them here."""
    first = exc.waiting[0]
    if first.state == "unknown":
        return (
            f"thread {exc.thread_id}: the outcome of {first.tool} (call {first.call_id}) is "
            "unknown: its kernel stopped while it ran, so the write may have happened. Check, "
            f"then run %loom resolve {first.call_id} happened|retry|failed, or start a new "
            "thread with --new"
        )
    undecided = [p for p in exc.waiting if p.state == "pending"]
    if not undecided:
        return str(exc)
    ids = " ".join(p.call_id for p in undecided)
    return (
        f"thread {exc.thread_id} waits for approval of {undecided[0].tool} ({ids}): click "
        f"Approve/Reject, or run %loom approve {undecided[0].call_id} / %loom reject "
        f"{undecided[0].call_id}, or start a new thread with --new"
    )
