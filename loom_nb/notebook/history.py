"""A saved thread as one block of HTML.

A thread resumed after a restart can hold thousands of messages. One widget per message would
send thousands of comm messages at once, and JupyterLab's IOPub rate limit drops what goes past
it, so part of the thread would never appear. The history is therefore one HTML widget; tool
calls fold with ``<details>``, as the live view's accordions do. Live runs add widgets after it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from loom_nb import _words
from loom_nb._messages import NEWER, Message, ToolCall, ToolResult
from loom_nb._numbers import TracedNumber, trace_messages
from loom_nb._shown import Kind, Shown, shown
from loom_nb.notebook._calls import CallText, body_html, summary
from loom_nb.notebook._html import (
    chart_html,
    esc,
    failed_html,
    head_html,
    interrupted_html,
    markdown_html,
    rejected_html,
    user_html,
)
from loom_nb.notebook._tracebacks import traceback_text

#: What each kind of result draws beside its call, in the live view and a saved thread alike
#: ("" for none: the model's text is in the call's fold; a waiting call has its card).
RESULT_HTML: dict[Kind, Callable[[Shown], str]] = {
    Kind.FRAME: lambda s: head_html(s.head, s.tool) if s.head is not None else "",
    Kind.CHART: lambda s: chart_html(s.chart) if s.chart is not None else "",
    Kind.REJECTED: lambda s: rejected_html(s.tool),
    Kind.ERROR: lambda s: failed_html(s.tool, s.text, traceback_text(s.call_id)),
    Kind.TEXT: lambda s: "",
    Kind.PENDING: lambda s: "",
    Kind.UNKNOWN: lambda s: "",
}


def result_block(found: Shown) -> str:
    """The block beside a call for its kind, in a ``loom-KIND`` div ("" when it has none)."""
    inner = RESULT_HTML[found.kind](found)
    return _block(inner, f"loom-{found.kind.value}") if inner else ""


def kind_class(found: Shown | None) -> str:
    """The class a call's fold carries for the kind of its result (``loom-kind-frame``)."""
    return f" loom-kind-{found.kind.value}" if found is not None else ""


def history_html(
    messages: Iterable[Message],
    rows: int,
    results: Mapping[str, ToolResult] | None = None,
    calls: CallText | None = None,
    numbers: Mapping[int, Sequence[TracedNumber]] | None = None,
) -> str:
    """``messages`` as one block of HTML; tool results fold into their calls (``results``:
    those of a longer thread these messages are part of), which read in words and as code
    when ``calls`` knows the agent's tools. The numbers of each assistant message are marked
    (``numbers``: by ``id()`` of their message; else traced over ``messages``)."""
    calls = calls or CallText()
    messages = list(messages)
    if numbers is None:
        numbers = numbers_by_id(messages)
    if results is None:
        results = {r.call_id: r for m in messages for r in m.tool_results}
    parts: list[str] = []
    for message in messages:
        if message.newer_parts:
            said = _words.newer_parts(len(message.newer_parts), NEWER)
            parts.append(_block(esc(said), "loom-newer"))
        if message.role == "user":
            parts.append(_div(user_html(message.text), "loom-user"))
        elif message.role == "assistant":
            if message.text:
                marks = numbers.get(id(message), ())
                parts.append(_div(markdown_html(message.text, marks), "loom-assistant"))
            parts.extend(_call(call, results.get(call.id), calls) for call in message.tool_calls)
        else:
            # a saved frame: only the rows shown are decoded
            parts.extend(result_block(shown(r, rows=rows)) for r in message.tool_results)
            parts.extend(
                _block(interrupted_html(n.text), "loom-interrupted") for n in message.interruptions
            )
    return "".join(parts)


def numbers_by_id(messages: Sequence[Message]) -> dict[int, list[TracedNumber]]:
    """The traced numbers of ``messages``, by ``id()`` of the message that states them."""
    found: dict[int, list[TracedNumber]] = {}
    for n in trace_messages(messages):
        found.setdefault(id(messages[n.message]), []).append(n)
    return found


def _div(inner: str, kind: str) -> str:
    return f'<div class="loom-message {kind}" style="margin:4px 0">{inner}</div>'


def _block(inner: str, kind: str) -> str:
    return f'<div class="{kind}" style="margin:4px 0">{inner}</div>'


def _call(call: ToolCall, result: ToolResult | None, calls: CallText) -> str:
    found = shown(result, rows=0) if result is not None else None
    return (
        f'<details class="loom-tool-call{kind_class(found)}" style="margin:4px 0">'
        f"<summary>{esc(summary(calls.words(call), result))}</summary>"
        f"{body_html(call, calls.code(call), result)}</details>"
    )
