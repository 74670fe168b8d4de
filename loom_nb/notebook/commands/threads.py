"""``%loom threads [AGENT]``: the saved threads as a DataFrame, newest first, after a line
saying which store they were read from (a hub admin's ``LOOM_STORE`` or an agent's own)."""

from __future__ import annotations

from typing import Any

from loom_nb._store import describe
from loom_nb.notebook.session import Session

COLUMNS = ["id", "title", "agent", "updated", "messages", "pending", "current"]


def run(session: Session, agent_name: str | None) -> Any:
    """The threads of ``agent_name`` (default: every agent here), one row each."""
    import pandas as pd

    agents = [session.agent(agent_name)] if agent_name else session.unique_agents()
    stores = dict.fromkeys(describe(a.store) for a in agents)
    if stores:
        print(f"threads in {'; '.join(stores)}")
    rows = [
        {
            "id": i.id,
            "title": i.title,
            "agent": i.agent,
            "updated": i.updated_at,
            "messages": i.message_count,
            "pending": i.pending_count,
            "current": session.current.get(i.agent) == i.id,
        }
        for a in agents
        for i in a.threads(context=session.context(), limit=1000)
    ]
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame = frame.sort_values("updated", ascending=False, ignore_index=True)
    frame["updated"] = [_local(t) for t in frame["updated"]]
    return frame


def _local(moment: Any) -> str:
    """A stored (UTC) time as a person reads it here: local, to the minute, with the zone."""
    here = moment.to_pydatetime().astimezone()  # a pandas Timestamp, from the frame
    return str(here.strftime("%Y-%m-%d %H:%M %Z"))
