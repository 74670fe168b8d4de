"""Bounds on what a model may send as a tool call's arguments.

Arguments are saved, digested, validated and shown; every one of those walks them, and most
walk recursively. A model (or a prompt injection) can send JSON nested a thousand levels deep
or megabytes long. Such a call is answered with an error result, so the run goes on: it is
measured here without recursion, before anything else touches it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from loom_nb._messages import ToolCall

#: No tool's input needs more; JSON libraries start failing near 1,000.
MAX_DEPTH = 64
#: Values in all lists and objects together.
MAX_ITEMS = 100_000
#: Characters in all strings and keys together.
MAX_CHARS = 1_000_000
#: Arguments that are not a JSON object are kept (to show and to send back) up to this length.
MAX_RAW_CHARS = 10_000

_NOT_KEPT = "[arguments not kept: "


def size_problem(value: Any, *, depth_only: bool = False) -> str | None:
    """Why ``value`` (JSON-like data) is too deep or too large to handle, or None.
    ``depth_only`` checks only the nesting (a tool's result may be large, not that deep)."""
    if type(value) is dict and _flat_and_small(value):
        return None  # most calls and results: no walk
    stack: list[tuple[Any, int]] = [(value, 0)]
    items = chars = 0
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            chars += len(item)
        elif isinstance(item, (dict, list, tuple)):
            if depth >= MAX_DEPTH:
                return f"nested more than {MAX_DEPTH} levels deep"
            items += len(item)
            if isinstance(item, dict):
                chars += sum(len(k) for k in item if isinstance(k, str))
                stack.extend((v, depth + 1) for v in item.values())
            else:
                stack.extend((v, depth + 1) for v in item)
        if depth_only:
            continue
        if items > MAX_ITEMS:
            return f"more than {MAX_ITEMS:,} values"
        if chars > MAX_CHARS:
            return f"more than {MAX_CHARS:,} characters of text"
    return None


_SCALARS = frozenset({int, float, bool, type(None)})


def _flat_and_small(value: dict[Any, Any]) -> bool:
    """Whether ``value`` holds only scalars, with well under the limits of text."""
    if len(value) > 1000:
        return False
    chars = 0
    for k, v in value.items():
        if type(v) is str:
            chars += len(v)
        elif type(v) not in _SCALARS:
            return False
        if type(k) is str:
            chars += len(k)
    return chars <= MAX_CHARS


def bounded_call(call: ToolCall) -> ToolCall:
    """``call``, or a copy without its arguments when they are too deep or too large (the
    call then gets an error result, see :func:`unusable_arguments`)."""
    if call.arguments is not None:
        problem = size_problem(call.arguments)
        if problem is not None:
            return ToolCall(call.id, call.name, None, raw_arguments=f"{_NOT_KEPT}{problem}]")
    raw = call.raw_arguments
    if raw is not None and len(raw) > MAX_RAW_CHARS:
        return dataclasses.replace(call, raw_arguments=raw[:MAX_RAW_CHARS] + "…")
    return call


def unusable_arguments(call: ToolCall) -> str:
    """What the model is told about a call whose arguments are not a usable JSON object."""
    raw = call.raw_arguments or ""
    if raw.startswith(_NOT_KEPT):
        return (
            f"The arguments for {call.name!r} are too large to use: "
            f"{raw[len(_NOT_KEPT) : -1]}. Send a smaller, flatter JSON object."
        )
    return (
        f"The arguments for {call.name!r} are not a JSON object: {raw[:200]!r}. Send a JSON object."
    )
