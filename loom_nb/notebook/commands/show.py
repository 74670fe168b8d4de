"""``%loom show [ID]``: a saved thread drawn whole, pending approval cards included."""

from __future__ import annotations

from IPython.core.error import UsageError

from loom_nb._agent import Agent
from loom_nb._messages import Thread
from loom_nb.notebook import _runs
from loom_nb.notebook.session import Session, usage_errors


def run(session: Session, thread_id: str | None) -> None:
    """Show ``thread_id``, or the current thread of the agent used last."""
    agent, thread = thread_or_current(session, thread_id, "show")
    view = _runs.open_view(session, agent)
    view.show()
    _runs.render_saved(session, agent, view, thread)


def thread_or_current(
    session: Session, thread_id: str | None, command: str
) -> tuple[Agent, Thread]:
    """Thread ``thread_id``, or the current thread of the agent used last."""
    if thread_id:
        return session.find_thread(thread_id)
    name = session.last_agent
    agent = next((a for a in session.unique_agents() if a.name == name), None)
    if agent is None:
        agent = session.agent(None)
    tid = session.current.get(agent.name)
    if tid is None:
        raise UsageError(
            f"{agent.name} has no current thread: pass an id (%loom {command} ID; list them "
            "with %loom threads)"
        )
    with usage_errors():
        return agent, agent.thread(tid, context=session.context())
