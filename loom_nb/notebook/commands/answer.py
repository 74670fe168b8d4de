"""``%loom answer CALL_ID TEXT``: answer the agent's question (``ask_user``), then resume in
this cell. The text form of a question card's buttons; quote an answer of several words."""

from __future__ import annotations

from IPython.core.error import UsageError

from loom_nb._agent import RunResult
from loom_nb._ask import is_question
from loom_nb.notebook.commands import decide
from loom_nb.notebook.session import Session


def run(session: Session, call_id: str, text: str) -> RunResult:
    """Answer question ``call_id`` with ``text`` and show the resumed run."""
    found = [p for _, t in session.pending() for p in t.pending if p.call_id == call_id]
    if found and not is_question(found[0]):
        raise UsageError(
            f"call {call_id} ({found[0].tool}) is not a question: decide it with "
            f"%loom approve {call_id} or %loom reject {call_id}"
        )
    if not text.strip():
        raise UsageError(f"%loom answer {call_id} TEXT: the answer is empty")
    return decide.run(session, [call_id], approve=text)
