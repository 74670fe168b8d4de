"""What the ``%loom`` line magic's subcommands do (the magic only parses)."""

from __future__ import annotations

from IPython.core.error import UsageError

from loom_nb._agent import Agent
from loom_nb._messages import Thread
from loom_nb.notebook.session import Session, View, usage_errors


def show(session: Session, thread_id: str | None) -> View:
    """Render a saved thread whole, pending approval cards included."""
    agent, thread = _thread_or_current(session, thread_id)
    view = session.make_view(agent)
    view.show()
    view.render(thread)
    return view


def resume(session: Session, thread_id: str) -> View:
    """Make ``thread_id`` the agent's current thread and render it."""
    agent, thread = session.find_thread(thread_id)
    session.current[agent.name] = thread.id
    session.last_agent = agent.name
    view = session.make_view(agent)
    view.show()
    view.render(thread)
    return view


def new(session: Session, agent_name: str | None) -> None:
    agent = session.agent(agent_name)
    session.current[agent.name] = None
    session.last_agent = agent.name
    print(f"The next %%loom {_var(session, agent)} starts a new thread.")


def delete(session: Session, thread_id: str) -> None:
    agent, thread = session.find_thread(thread_id)
    with usage_errors():
        agent.delete_thread(thread.id, context=session.context())
    if session.current.get(agent.name) == thread.id:
        session.current[agent.name] = None
    print(f"Deleted thread {thread.id} ({thread.title or 'untitled'}) of {agent.name}.")


def approvals(session: Session) -> list[View]:
    """Every call waiting for a decision, as cards grouped by thread."""
    found = session.pending()
    if not found:
        print("No call waits for approval.")
        return []
    views = []
    for agent, thread in found:
        view = session.make_view(agent)
        view.show()
        view.render(thread, history=False)
        views.append(view)
    return views


def chat(session: Session, agent_name: str | None) -> None:
    """Show the chat widget on the agent's current thread (text mode: a hint instead). It is
    displayed, not returned, so the cell shows it once; ``session().last_chat`` holds it."""
    agent = session.agent(agent_name)
    session.last_agent = agent.name
    if not session.widgets_mode():
        raise UsageError(
            f"the chat widget needs a Jupyter frontend; here use %%loom {_var(session, agent)}"
        )
    from loom_nb.notebook.widgets import ChatWidget, ThreadView

    view = session.make_view(agent)
    assert isinstance(view, ThreadView)
    tid = session.current.get(agent.name)
    if tid is not None:
        with usage_errors():
            view.render(agent.thread(tid, context=session.context()))
    widget = ChatWidget(view, lambda text: session.chat_send(agent, view, text))
    from IPython.display import display

    session.last_chat = widget
    display(widget)  # type: ignore[no-untyped-call]


def _thread_or_current(session: Session, thread_id: str | None) -> tuple[Agent, Thread]:
    if thread_id:
        return session.find_thread(thread_id)
    name = session.last_agent
    agent = next((a for a in session.unique_agents() if a.name == name), None)
    if agent is None:
        agent = session.agent(None)
    tid = session.current.get(agent.name)
    if tid is None:
        raise UsageError(
            f"{agent.name} has no current thread: pass an id (%loom show ID; list them with "
            "%loom threads)"
        )
    with usage_errors():
        return agent, agent.thread(tid, context=session.context())


def _var(session: Session, agent: Agent) -> str:
    return next((k for k, v in session.agents().items() if v is agent), agent.name)
