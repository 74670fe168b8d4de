"""What the model is sent of a thread: within a history budget, older results by reference.

The thread in the store, and what the user sees, keep everything. The model's view of it is a
deterministic function of the thread's messages and ``model_settings["history_tokens"]``
(:data:`HISTORY_TOKENS` by default), so the same thread gives the same bytes and providers'
prompt caches hit. The rule, in order:

1. The thread as it is, when it fits.
2. Else the oldest tool results become one reference line each (call id, tool, arguments,
   shape, and that it is kept), until it fits; the newest model turn's results stay whole.
   ``recall(call_id=...)`` gives a kept result back as it was stored.
3. Else the oldest turns (a user message, or a model turn with its results; never part of
   one) are left out, replaced by one note that lists the questions asked there (first line
   each) and the ids of the calls made there. The latest question and the newest turn stay.
4. Else the run stops with :class:`~loom_nb.HistoryTooLong`, which names the setting.

Steps 2 and 3 move in steps of a quarter of the budget, so the view's beginning stays the
same for several turns in a row (a cache hit) instead of changing at every turn.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from loom_nb._context import RunContext
from loom_nb._errors import HistoryTooLong
from loom_nb._messages import (
    TOOL_NAME,
    Message,
    Part,
    TextPart,
    ToolCall,
    ToolResult,
    is_pause_call,
    wire_call_id,
)
from loom_nb._tokens import MESSAGE_TOKENS, TokenCounter
from loom_nb._tools import Tool, ToolInputError, ToolOutput

__all__ = ["HISTORY_TOKENS", "RECALL", "HistoryView", "View", "recall_tool"]

#: The default history budget in tokens. A quarter of the 128k context of the smallest common
#: hosted chat model (GPT-4o; GPT-4.1 and Claude have more), leaving room for instructions,
#: tools and the answer, and a bound on what each turn's input costs. Local models with a small
#: context (Ollama's default) need a lower one.
HISTORY_TOKENS = 32_000

#: The built-in tool that reads a kept result back.
RECALL = "recall"

_QUESTIONS_LISTED = 10
_CALLS_LISTED = 30
_QUOTE_CHARS = 120
_ARGUMENT_CHARS = 160


@dataclass
class View:
    """One model turn's view of its thread."""

    messages: list[Message]
    #: Tokens of ``messages`` by the run's counter.
    tokens: int
    #: Call ids whose results are references here.
    referenced: list[str] = field(default_factory=list)
    #: Messages of the thread left out (summarized by the note).
    left_out: int = 0

    @property
    def shortened(self) -> bool:
        """Whether anything was referenced or left out (``recall`` is offered then)."""
        return bool(self.referenced or self.left_out)


class _Result:
    """One result's count, and its reference line with that line's count: made when a view
    is over budget (most views are not)."""

    def __init__(self, part: ToolResult, call: ToolCall | None, counter: TokenCounter) -> None:
        self.part = part
        self.full = counter.part(part)
        self._call = call
        self._counter = counter
        self._reference: tuple[ToolResult, int] | None = None

    def _referred(self) -> tuple[ToolResult, int]:
        if self._reference is None:
            part = self.part
            line = reference_line(part, self._call)
            reference = ToolResult(part.call_id, part.name, line, is_error=part.is_error)
            self._reference = reference, self._counter.part(reference)
        return self._reference

    @property
    def reference(self) -> ToolResult:
        return self._referred()[0]

    @property
    def referenced(self) -> int:
        return self._referred()[1]


class HistoryView:
    """The views of one run's turns: counts and reference lines are computed once per part."""

    def __init__(self, budget: int, counter: TokenCounter) -> None:
        self.budget = budget
        self.counter = counter
        self._results: dict[int, _Result] = {}

    def view(self, thread: Sequence[Message]) -> View:
        """What the next model turn is sent of ``thread``."""
        sent = _sent(thread)
        count = self.counter
        calls: dict[str, ToolCall] = {}
        base: list[int] = []  # each message's tokens but its results': what stays whatever
        found: list[tuple[int, ToolResult]] = []  # (message index, result)
        for i, m in enumerate(sent):  # one pass over the parts (a view is made every turn)
            tokens = MESSAGE_TOKENS
            for p in m.parts:
                if isinstance(p, ToolResult):
                    found.append((i, p))
                    continue
                tokens += count.part(p)
                if isinstance(p, ToolCall):
                    calls[p.id] = p
            base.append(tokens)
        results = [(i, self._result(p, calls.get(p.call_id))) for i, p in found]
        total = sum(base) + sum(r.full for _, r in results)
        if total <= self.budget:
            return View(sent, total)
        units = _units(sent)
        step = max(self.budget // 4, 1)
        last_start = units[-1][0]
        older = [(i, r) for i, r in results if i < last_start and r.full > r.referenced]
        possible = sum(r.full - r.referenced for _, r in older)
        deficit = total - self.budget
        target = min(math.ceil(deficit / step) * step, possible)
        chosen: set[int] = set()
        saved = 0
        for _, r in older:
            if saved >= target:
                break
            chosen.add(id(r.part))
            saved += r.full - r.referenced
        # each message as sent and its cost, from the results found (a long thread's messages
        # are mostly text: no pass over each one's parts again)
        shown = list(sent)
        cost = list(base)
        for i, r in results:
            cost[i] += r.referenced if id(r.part) in chosen else r.full
        for i in {i for i, r in results if id(r.part) in chosen}:
            shown[i] = _with_references(sent[i], chosen, self._results)
        referenced = [r.part.call_id for _, r in results if id(r.part) in chosen]
        if sum(cost) <= self.budget:
            return View(shown, sum(cost), referenced)
        return self._leave_out(shown, units, cost, referenced, step)

    def _leave_out(
        self,
        shown: list[Message],
        units: list[tuple[int, int]],
        cost: list[int],
        referenced: list[str],
        step: int,
    ) -> View:
        total = sum(cost)
        deficit = total - self.budget
        target = math.ceil(deficit / step) * step
        pinned = max((i for i, m in enumerate(shown) if m.role == "user"), default=-1)
        droppable = [u for u in units[:-1] if not u[0] <= pinned < u[1]]
        dropped: list[tuple[int, int]] = []
        note: Message | None = None  # the note for ``dropped`` as it is, once written
        note_tokens = 0
        saved = 0
        for unit in droppable:
            if saved - note_tokens >= target:
                # the note is written again only when the turns left out seem to be enough
                note = self._note(shown, dropped)
                note_tokens = self.counter.message(note)
                if saved - note_tokens >= target:
                    break
            dropped.append(unit)
            note = None
            saved += sum(cost[unit[0] : unit[1]])
        if dropped and note is None:
            note = self._note(shown, dropped)
            note_tokens = self.counter.message(note)
        if saved - note_tokens < deficit:
            raise HistoryTooLong(
                f"what the model must be sent of this thread (the latest question and the "
                f"newest turn, about {total - saved + note_tokens:,} tokens) does not fit "
                f"model_settings['history_tokens'] = {self.budget:,}: raise it (within the "
                "model's context) or ask for less data (a smaller limit / max_rows)"
            )
        gone = {i for start, end in dropped for i in range(start, end)}
        kept = [m for i, m in enumerate(shown) if i not in gone]
        assert note is not None  # something was left out, or HistoryTooLong was raised
        messages = [note, *kept]
        left = [r for r in referenced if not any(r in _ids(shown[i]) for i in gone)]
        return View(messages, total - saved + note_tokens, left, len(gone))

    def _note(self, shown: list[Message], dropped: list[tuple[int, int]]) -> Message:
        """The note that stands for the turns left out: loom_nb's words, the user's questions
        (their first lines) and the ids of the calls made there."""
        messages = [shown[i] for start, end in dropped for i in range(start, end)]
        # the newest questions and calls are listed, the others counted: a long thread's note
        # reads the first lines of only those it lists
        asked = [m for m in messages if m.role == "user"]
        questions = [_first_line(m.text) for m in asked[-_QUESTIONS_LISTED:]]
        calls = [p for m in messages for p in m.parts if isinstance(p, ToolCall)]
        text = (
            f"[loom_nb] {len(messages)} earlier messages of this thread are left out here, to "
            f"keep what you are sent within the history budget (model_settings['history_tokens']"
            f" = {self.budget:,} tokens); the thread keeps them all."
        )
        if questions:
            more = len(asked) - len(questions)
            text += (
                " The user asked there"
                + (f" ({more} earlier questions not listed)" if more else "")
                + ": "
                + "; ".join(json.dumps(q, ensure_ascii=False) for q in questions)
                + "."
            )
        if calls:
            listed_calls = calls[-_CALLS_LISTED:]
            more = len(calls) - len(listed_calls)
            text += (
                " Tool calls made there, oldest first"
                + (f" ({more} earlier ones not listed)" if more else "")
                + ": "
                + ", ".join(f"{wire_call_id(c.id)} ({_listed_name(c.name)})" for c in listed_calls)
                + f". {RECALL}(call_id=...) returns any call's result as it was stored."
            )
        return Message("user", [TextPart(text)], created_at=messages[0].created_at)

    def _result(self, part: ToolResult, call: ToolCall | None) -> _Result:
        found = self._results.get(id(part))
        if found is not None and found.part is part:
            return found
        made = _Result(part, call, self.counter)
        self._results[id(part)] = made
        return made


def _listed_name(name: str) -> str:
    """A call's tool name for loom_nb's own words: one that no tool can have came from a model
    or from elsewhere (``a.b``, or text that gives orders), and stays out of them (its call's
    id, :func:`wire_call_id`, stands for it: the id the model was sent)."""
    return name if TOOL_NAME.fullmatch(name) else "a tool name the APIs refuse"


def reference_line(result: ToolResult, call: ToolCall | None) -> str:
    """The line that stands for a kept result: loom_nb's words, no value of the data (a
    table's shape only, from the stored frame's header)."""
    arguments = ""
    if call is not None and call.arguments is not None:
        arguments = json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)
        if len(arguments) > _ARGUMENT_CHARS:
            arguments = arguments[: _ARGUMENT_CHARS - 1] + "…"
    head = result.frame_head(0)
    if head is not None:
        shape = f"a table of {head.rows:,} rows × {head.columns:,} columns"
    elif result.chart is not None:
        shape = "a chart"
    elif result.is_error:
        shape = "an error"
    else:
        shape = f"{len(result.content):,} characters"
    call_id = wire_call_id(result.call_id)
    return (
        f"[kept result] call {call_id}: {_listed_name(result.name)}({arguments}) returned "
        f"{shape}. It is kept in the thread and left out here to stay within the history "
        f'budget; {RECALL}(call_id="{call_id}") returns it as it was stored.'
    )


def _sent(thread: Sequence[Message]) -> list[Message]:
    """The messages of ``thread`` the model may be sent: the thread's own list when that is
    all of it (a request then keeps no copy, see ``MessagesSoFar``)."""
    for m in thread:
        if _sendable(m) is not m:
            return [s for s in (_sendable(m) for m in thread) if s is not None]
    return thread if isinstance(thread, list) else list(thread)


def _sendable(message: Message) -> Message | None:
    """``message`` as the model may be sent it: without the parts of a run's pauses (loom_nb's
    own, never the model's) nor a newer loom_nb's parts; None when nothing is left."""
    for p in message.parts:  # most messages are sent whole: found without a new list
        kind = type(p)
        if kind is TextPart:
            continue
        if kind is ToolCall and not is_pause_call(p.id):  # type: ignore[union-attr]
            continue
        if kind is ToolResult and not is_pause_call(p.call_id):  # type: ignore[union-attr]
            continue
        break
    else:
        return message
    parts: list[Part] = [
        p
        for p in message.parts
        if isinstance(p, TextPart)
        or (isinstance(p, ToolCall) and not is_pause_call(p.id))
        or (isinstance(p, ToolResult) and not is_pause_call(p.call_id))
    ]
    if len(parts) == len(message.parts):
        return message
    if not parts:
        return None
    return Message(message.role, parts, message.created_at, message.usage, message.model)


def _units(messages: Sequence[Message]) -> list[tuple[int, int]]:
    """``[start, end)`` of each turn: a user message, or a model turn with its results."""
    units: list[tuple[int, int]] = []
    for i, m in enumerate(messages):
        if m.role == "tool" and units:
            units[-1] = (units[-1][0], i + 1)
        else:
            units.append((i, i + 1))
    return units


def _with_references(message: Message, chosen: set[int], results: dict[int, _Result]) -> Message:
    if not any(id(p) in chosen for p in message.tool_results):
        return message
    parts = [results[id(p)].reference if id(p) in chosen else p for p in message.parts]
    return Message(message.role, parts, message.created_at, message.usage, message.model)


def _ids(message: Message) -> set[str]:
    return {r.call_id for r in message.tool_results}


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= _QUOTE_CHARS else line[: _QUOTE_CHARS - 1] + "…"


# ---- the recall tool ------------------------------------------------------------------------

_RECALLED = (
    "Recalled: the result of call {call_id} ({tool}) exactly as it was stored when it ran; "
    "nothing was run or queried again."
)


async def _recall(call_id: str, ctx: RunContext) -> ToolOutput:
    for result in ctx.tool_results():
        # the id as the model was sent it: a digest for one the APIs refuse (wire_call_id)
        if call_id in (result.call_id, wire_call_id(result.call_id)) and not is_pause_call(
            result.call_id
        ):
            said = _RECALLED.format(
                call_id=wire_call_id(result.call_id), tool=_listed_name(result.name)
            )
            return ToolOutput(f"{said}\n{result.content}", is_error=result.is_error)
    return ToolOutput(
        json.dumps(
            {
                "error": "this thread has no saved result of that call id; use an id from a "
                "[kept result] line or the note of turns left out"
            }
        ),
        is_error=True,
    )


def _bind_recall(arguments: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """``recall``'s arguments checked, as a copy (the run adds its context to the copy)."""
    if set(arguments) != {"call_id"} or not isinstance(arguments["call_id"], str):
        raise ToolInputError("recall takes one argument, call_id: the id of an earlier call")
    return [], {"call_id": arguments["call_id"]}


@functools.cache
def recall_tool() -> Tool:
    """``recall(call_id)``: a kept result of this thread, as stored (the same rows and data
    block the model was first given). One value, as the agent's own tools are."""
    return Tool(
        name=RECALL,
        description=(
            "Read again the result of an earlier tool call of this conversation, by its call "
            "id (from a [kept result] line). Returns the result exactly as it was stored; "
            "nothing is run again."
        ),
        parameters={
            "type": "object",
            "properties": {
                "call_id": {"type": "string", "description": "The id of the earlier call."}
            },
            "required": ["call_id"],
            "additionalProperties": False,
        },
        function=_recall,
        _bind=_bind_recall,
        _takes_ctx="ctx",
        describe=lambda arguments: f"recall · {arguments.get('call_id', '')}",
    )
