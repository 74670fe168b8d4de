"""``%loom new [AGENT]``: the agent's next ``%%loom`` starts a new thread."""

from __future__ import annotations

from loom_nb.notebook.session import Session


def run(session: Session, agent_name: str | None) -> None:
    """Forget the agent's current thread (it stays saved)."""
    agent = session.agent(agent_name)
    session.current[agent.name] = None
    session.last_agent = agent.name
    print(f"The next %%loom {session.variable(agent)} starts a new thread.")
