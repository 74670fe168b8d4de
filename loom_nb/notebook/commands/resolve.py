"""``%loom resolve CALL_ID happened|retry|failed``: the user's choice for a call whose outcome
is unknown (its kernel stopped while it ran, so the write may have happened), then resume.

The text-mode form of the three buttons on such a call's card.
"""

from __future__ import annotations

from typing import get_args

from IPython.core.error import UsageError

from loom_nb._agent import RunResult
from loom_nb._messages import Resolution
from loom_nb.notebook.commands import decide
from loom_nb.notebook.session import Session


def run(session: Session, call_id: str, choice: str) -> RunResult:
    """Record ``choice`` for ``call_id`` and show the resumed run."""
    choices = get_args(Resolution)
    if choice not in choices:
        raise UsageError(
            f"%loom resolve {call_id} {choice}: choose {', '.join(choices)} (it happened, go on "
            "/ it did not, run it again / tell the agent it failed)"
        )
    resolution: Resolution = choice  # type: ignore[assignment]
    return decide.run(session, [call_id], approve=resolution)
