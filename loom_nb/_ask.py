"""``ask_user``: the built-in tool an agent asks the user a question with.

A question waits like a write's card: the run stops with a pending call (tool ``ask_user``,
its question and choices as arguments) saved with the message that asked, and the answer is
that call's result, saved by one compare-and-set (pending -> done with the answer), so of any
number of kernels answering one question exactly one does. The tool itself never runs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from loom_nb._errors import UserError
from loom_nb._messages import PendingApproval, ToolResult
from loom_nb._tools import Tool, tool

ASK_USER = "ask_user"
#: Bounds on what the model may ask (a card, not a document).
MAX_QUESTION = 2000
MAX_CHOICES = 10
MAX_CHOICE = 200
MAX_ANSWER = 10_000

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "question": {"type": "string", "minLength": 1, "maxLength": MAX_QUESTION},
        "choices": {
            "type": ["array", "null"],
            "items": {"type": "string", "minLength": 1, "maxLength": MAX_CHOICE},
            "minItems": 2,
            "maxItems": MAX_CHOICES,
            "uniqueItems": True,
        },
    },
    "required": ["question"],
    "additionalProperties": False,
}

_DESCRIPTION = (
    "Ask the user a question and wait for the answer, instead of guessing: what a term means "
    "(fiscal or calendar quarter?), which of several readings they want. Give choices when "
    "the answer is one of a few (2 to 10); leave them out for a free answer. The answer comes "
    "back as this call's result. Ask one question at a time, only when it matters."
)


def _never(arguments: dict[str, Any]) -> str:
    raise AssertionError("ask_user is answered by the user, never run")


def _card(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"question": arguments.get("question"), "choices": arguments.get("choices")}


def ask_user_tool() -> Tool:
    """The ``ask_user`` tool ``define_agent`` adds unless ``ask_user=False``."""
    made: Tool = tool(
        name=ASK_USER,
        description=_DESCRIPTION,
        input=_SCHEMA,
        run=_never,
        needs_approval=True,
        preview=_card,
        describe=lambda a: f"asks: {a.get('question', '')}",
    )
    return made


def is_built_in(t: Tool) -> bool:
    """Whether ``t`` is this tool (an agent's tools passed to another ``define_agent``)."""
    return t.function is _never


def is_question(p: PendingApproval) -> bool:
    """Whether ``p`` is a question waiting for an answer (not a write waiting for approval)."""
    return p.tool == ASK_USER


def choices_of(p: PendingApproval) -> list[str] | None:
    choices = p.arguments.get("choices")
    if isinstance(choices, Sequence) and not isinstance(choices, str):
        return [str(c) for c in choices]
    return None


def checked_answer(p: PendingApproval, answer: str) -> str:
    """``answer`` for question ``p``, or a UserError that says what it takes."""
    text = answer.strip()
    if not text:
        raise UserError(f"the answer to call {p.call_id} is empty: give the text of the answer")
    if len(text) > MAX_ANSWER:
        raise UserError(f"the answer to call {p.call_id} is over {MAX_ANSWER:,} characters")
    choices = choices_of(p)
    if choices is not None and text not in choices:
        raise UserError(
            f"call {p.call_id} asks to choose one of {json.dumps(choices, ensure_ascii=False)}; "
            f"got {text!r}"
        )
    return text


def answer_result(p: PendingApproval, answer: str) -> ToolResult:
    """The call's result: the user's answer, as the model reads it."""
    return ToolResult(p.call_id, ASK_USER, answer, approval="approved")


def declined_result(p: PendingApproval) -> ToolResult:
    return ToolResult(
        p.call_id,
        ASK_USER,
        json.dumps({"error": "The user chose not to answer; go on without it or ask otherwise."}),
        is_error=True,
        approval="rejected",
    )
