"""``%loom rules [AGENT]``: the rules in force that approve (or reject) calls by themselves, as
a DataFrame, one row each (``agent.allow`` / ``agent.deny`` make them), drawn as HTML that
every static copy keeps."""

from __future__ import annotations

from typing import Any

from loom_nb.notebook._static import shown_frame
from loom_nb.notebook.session import Session, usage_errors

COLUMNS = [
    "id",
    "agent",
    "kind",
    "tool",
    "table",
    "columns",
    "max_rows",
    "where",
    "scope",
    "thread",
    "until",
    "rule",
]


def run(session: Session, agent_name: str | None) -> Any:
    """The rules of ``agent_name`` (default: every agent here), oldest first."""
    import pandas as pd

    agents = [session.agent(agent_name)] if agent_name else session.unique_agents()
    with usage_errors():
        found = [r for a in agents for r in a.rules(context=session.context())]
    rows = [
        {
            "id": r.id,
            "agent": r.agent,
            "kind": r.kind,
            "tool": r.tool,
            "table": r.table,
            "columns": ", ".join(r.columns) if r.columns is not None else None,
            "max_rows": r.max_rows,
            "where": r.where,
            "scope": r.scope,
            "thread": r.thread_id,
            "until": r.until,
            "rule": r.describe(),
        }
        for r in found
    ]
    print(
        f"{len(rows)} rule{'s' if len(rows) != 1 else ''} in force"
        + ("; end one with %loom revoke RULE_ID" if rows else "")
    )
    return shown_frame(pd.DataFrame(rows, columns=COLUMNS))
