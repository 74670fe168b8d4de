"""``%loom threads [AGENT]``: the saved threads as a DataFrame, newest first, after a line
saying which store they were read from (a hub admin's ``LOOM_STORE`` or an agent's own), with
each thread's tokens in (and of them cached) and out and its cost ("price unknown" when a turn's
price is not known, never $0). It is drawn as HTML every static copy keeps (``shown_frame``),
its times local, to the minute.

The stores' thread rows do not carry a running usage total, so each listed thread is loaded to
add up its turns' usage; the listing is bounded by ``LIMIT``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loom_nb._agent import Agent
from loom_nb._errors import ThreadNotFound
from loom_nb._messages import Usage
from loom_nb._store import describe
from loom_nb.notebook._static import shown_frame
from loom_nb.notebook.session import Session

COLUMNS = [
    "id",
    "title",
    "agent",
    "updated",
    "messages",
    "pending",
    "current",
    "tokens in",
    "cached",
    "tokens out",
    "cost",
]
#: The most threads listed per agent (each is loaded to add up its usage).
LIMIT = 1000


def run(session: Session, agent_name: str | None) -> Any:
    """The threads of ``agent_name`` (default: every agent here), one row each."""
    import pandas as pd

    agents = [session.agent(agent_name)] if agent_name else session.unique_agents()
    stores = dict.fromkeys(describe(a.store) for a in agents)
    if stores:
        print(f"threads in {'; '.join(stores)}")
    context = session.context()
    rows = []
    for a in agents:
        for i in a.threads(context=context, limit=LIMIT):
            used = _usage(a, i.id, context)
            rows.append(
                {
                    "id": i.id,
                    "title": i.title,
                    "agent": i.agent,
                    "updated": i.updated_at,
                    "messages": i.message_count,
                    "pending": i.pending_count,
                    "current": session.current.get(i.agent) == i.id,
                    "tokens in": used.input_tokens,
                    "cached": used.cache_read_tokens + used.cache_write_tokens,
                    "tokens out": used.output_tokens,
                    "cost": _cost(used),
                }
            )
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame = frame.sort_values("updated", ascending=False, ignore_index=True)
    frame["updated"] = [_local(t) for t in frame["updated"]]
    return shown_frame(frame)


def _local(moment: Any) -> str:
    """A stored (UTC) time as a person reads it here: local, to the minute, with the zone."""
    here = moment.to_pydatetime().astimezone()  # a pandas Timestamp, from the frame
    return str(here.strftime("%Y-%m-%d %H:%M %Z"))


def _usage(agent: Agent, thread_id: str, context: Mapping[str, Any] | None) -> Usage:
    """The thread's model turns added up; nothing when it was deleted since it was listed."""
    try:
        return agent.thread(thread_id, context=context).usage
    except ThreadNotFound:
        return Usage()


def _cost(used: Usage) -> str:
    """``$0.0061``; "price unknown" when a turn's price is not known; "" with no turn yet."""
    if used.empty:
        return ""
    return "price unknown" if used.cost is None else f"${used.cost:,.4f}"
