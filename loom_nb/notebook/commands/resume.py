"""``%loom resume ID``: make a saved thread current for its agent and show it whole."""

from __future__ import annotations

from loom_nb.notebook import _runs
from loom_nb.notebook.session import Session


def run(session: Session, thread_id: str) -> None:
    """The next ``%%loom`` of the thread's agent continues ``thread_id``."""
    agent, thread = session.find_thread(thread_id)
    session.current[agent.name] = thread.id
    session.last_agent = agent.name
    view = _runs.open_view(session, agent)
    view.show()
    _runs.render_saved(session, agent, view, thread)
