"""``%%loom [AGENT] ...``: send the cell to the agent and show the thread as it streams."""

from __future__ import annotations

from IPython.core.error import UsageError

from loom_nb._agent import RunResult
from loom_nb._errors import RunError
from loom_nb._messages import Thread
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
) -> RunResult:
    """Run ``prompt`` on the agent's current thread (a new one with ``new``, or
    ``thread_id``); blocks the cell until the run ends, then assigns ``binding``'s names."""
    agent = session.agent(agent_name)
    with usage_errors():
        if thread_id is not None:
            agent._checked(thread_id, session.context())
        tid = None if new else thread_id or session.current_thread(agent)
        if tid is not None:  # the thread the agent keeps: a long one is not loaded per cell
            _refuse_pending(agent._checked(tid, session.context()))
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
        raise RunFailed(f"{agent.name}: {exc}", result=failed) from None
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


def _refuse_pending(thread: Thread) -> None:
    """A new message cannot go to a thread whose calls wait: say how to decide them."""
    waiting = [p for p in thread.pending if p.decision is None]
    if waiting:
        ids = " ".join(p.call_id for p in waiting)
        raise UsageError(
            f"thread {thread.id} waits for approval of {waiting[0].tool} ({ids}): click "
            f"Approve/Reject, or run %loom approve {waiting[0].call_id} / %loom reject "
            f"{waiting[0].call_id}, or start a new thread with --new"
        )
