"""A tool call from the pieces a provider streams: its id, its name and its arguments' text."""

from __future__ import annotations

import json
from typing import Any

from loom_nb._messages import ToolCall, new_call_id


def parse_arguments(raw: str) -> dict[str, Any] | None:
    """Streamed tool arguments: a JSON object, ``{}`` for nothing, else None (bad JSON)."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):  # nested too deeply is unreadable too
        return None
    return value if isinstance(value, dict) else None


def tool_call(call_id: str | None, name: str, raw: str) -> ToolCall:
    """A complete tool call from its streamed pieces; bad JSON keeps the raw text."""
    arguments = parse_arguments(raw)
    return ToolCall(
        call_id or new_call_id(),
        name,
        arguments,
        raw_arguments=None if arguments is not None else raw,
    )
