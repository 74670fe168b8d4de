"""``%loom show [ID]``: a saved thread drawn whole, pending approval cards included."""

from __future__ import annotations

from IPython.core.error import UsageError

from loom_nb._agent import Agent
from loom_nb._messages import Thread
from loom_nb.notebook import _runs
from loom_nb.notebook._view import View
from loom_nb.notebook.session import Session, usage_errors


def run(session: Session, thread_id: str | None) -> None:
    """Show ``thread_id``, or the current thread of the agent used last; the earlier views
    of it in this kernel catch up on the calls decided since (see :func:`catch_up`)."""
    agent, thread = thread_or_current(session, thread_id, "show")
    view = _runs.open_view(session, agent)
    view.show()
    _runs.render_saved(session, agent, view, thread)
    catch_up(session, thread, view)


#: What an earlier view's card says of a call decided since it was drawn.
DECIDED_LATER = "decided after this output was saved: see %loom show"


def catch_up(session: Session, thread: Thread, shown: View) -> None:
    """Each earlier view of ``thread`` still on screen marks the cards the store says were
    decided since (another cell, a click, another kernel): their static forms are sent
    again, so a saved copy no longer reads as waiting where the update reaches it."""
    results = {r.call_id: r for r in thread.tool_results()}
    pending = {p.call_id: p for p in thread.pending}
    for view in list(session.views):
        if view is shown or view.thread_id != thread.id:
            continue
        for card in getattr(view, "cards", ()):  # widget views; printed cards stay as printed
            if card.decision is not None:
                continue
            result, waiting = results.get(card.call_id), pending.get(card.call_id)
            if result is not None and result.approval is not None:
                decided = result.approval == "approved"
            elif waiting is not None and waiting.decision is not None:
                decided = waiting.decision
            else:
                continue
            view.mark_decided([card.call_id], decided, DECIDED_LATER)


def thread_or_current(
    session: Session, thread_id: str | None, command: str
) -> tuple[Agent, Thread]:
    """Thread ``thread_id``, or the current thread of the agent used last; an agent's variable
    name instead of an id: its current thread, else its latest."""
    if thread_id and isinstance(session.namespace.get(thread_id), Agent):
        return _agents_thread(session, session.agent(thread_id), thread_id, command)
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


def _agents_thread(session: Session, agent: Agent, name: str, command: str) -> tuple[Agent, Thread]:
    """The agent's current thread, or its most recently updated one."""
    tid = session.current.get(agent.name)
    if tid is None:
        with usage_errors():
            latest = agent.threads(context=session.context(), limit=1)
        if not latest:
            raise UsageError(f"{name} has no saved threads yet: ask it with %%loom {name}")
        tid = latest[0].id
    with usage_errors():
        return agent, agent.thread(tid, context=session.context())
