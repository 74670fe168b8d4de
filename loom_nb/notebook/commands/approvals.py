"""``%loom approvals``: every call waiting for a decision, as cards grouped by thread."""

from __future__ import annotations

from loom_nb.notebook import _runs
from loom_nb.notebook.session import Session


def run(session: Session) -> None:
    """One view per thread with waiting calls (current threads first), its cards only."""
    found = session.pending()
    if not found:
        print("No call waits for approval.")
        return
    for agent, thread in found:
        view = _runs.open_view(session, agent)
        view.show()
        _runs.render_saved(session, agent, view, thread, history=False)
