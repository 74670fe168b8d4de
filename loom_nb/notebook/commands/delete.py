"""``%loom delete ID``: delete a saved thread."""

from __future__ import annotations

from loom_nb._inert import inert
from loom_nb.notebook.session import Session, usage_errors


def run(session: Session, thread_id: str) -> None:
    """Delete ``thread_id`` from its agent's store; if it was current, the next run starts one."""
    agent, thread = session.find_thread(thread_id)
    with usage_errors():
        agent.delete_thread(thread.id, context=session.context())
    if session.current.get(agent.name) == thread.id:
        session.current[agent.name] = None
    title = inert(thread.title or "untitled")  # the model's or the data's words, maybe
    print(f"Deleted thread {thread.id} ({title}) of {agent.name}.")
