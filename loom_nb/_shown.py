"""How one tool call is shown: the one decision every view reads.

:func:`shown` looks at a call's result (or, while it has none, at its pending state) and
says which :class:`Kind` it is, with what a view needs to draw that kind. The widgets, the
saved thread's HTML, the static copy, the terminal text and the HTTP thread page each map
the kind to their own markup; none of them looks at the result's fields to decide again.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from typing import Any

from loom_nb._codec import FrameHead
from loom_nb._messages import PendingApproval, ToolResult


class Kind(enum.Enum):
    """What a call shows: a table, a chart, a rejection, an error, the model's text, a
    decision it waits for, or an outcome nobody knows (its run stopped while it ran)."""

    FRAME = "frame"
    CHART = "chart"
    REJECTED = "rejected"
    ERROR = "error"
    TEXT = "text"
    PENDING = "pending"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Shown:
    """A call as the views show it: its :class:`Kind` and what that kind draws."""

    kind: Kind
    #: The tool's name.
    tool: str
    #: FRAME: the frame's first rows (a saved frame decodes only those), its shape, counts.
    head: FrameHead | None = None
    #: CHART: the chart's saved spec.
    chart: dict[str, Any] | None = None
    #: ERROR: what the model was told went wrong. TEXT: what the model saw.
    text: str = ""
    #: "approved" / "rejected" when the call waited for the user.
    approval: str | None = None
    #: PENDING / UNKNOWN: the call as it waits.
    pending: PendingApproval | None = None
    #: The rule that approved or rejected the call, when a rule did (``Agent.allow``).
    rule: str | None = None
    #: The call's id (where the user's code raised, for its traceback).
    call_id: str = ""


def shown(
    result: ToolResult | None, pending: PendingApproval | None = None, *, rows: int = 10
) -> Shown:
    """How the call with ``result`` (None while it has none; then ``pending``, its waiting
    state) is shown, a frame's first ``rows`` rows included."""
    if result is None:
        if pending is None:
            raise ValueError("shown() needs the call's result or its pending state")
        kind = Kind.UNKNOWN if pending.state == "unknown" else Kind.PENDING
        return Shown(kind, pending.tool, pending=pending)
    said = Shown(
        Kind.TEXT, result.name, approval=result.approval, rule=result.rule, call_id=result.call_id
    )
    if result.approval == "rejected":
        return dataclasses.replace(said, kind=Kind.REJECTED)
    if result.is_error:
        return dataclasses.replace(said, kind=Kind.ERROR, text=result.error or "")
    if result.chart is not None:
        return dataclasses.replace(said, kind=Kind.CHART, chart=result.chart)
    head = result.frame_head(rows)
    if head is not None:
        return dataclasses.replace(said, kind=Kind.FRAME, head=head)
    return dataclasses.replace(said, text=result.content)
