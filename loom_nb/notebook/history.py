"""A saved thread as one block of HTML.

A thread resumed after a restart can hold thousands of messages. One widget per message would
send thousands of comm messages at once, and JupyterLab's IOPub rate limit drops what goes past
it, so part of the thread would never appear. The history is therefore one HTML widget; tool
calls fold with ``<details>``, as the live view's accordions do. Live runs add widgets after it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from loom_nb._messages import NEWER, Message, ToolCall, ToolResult
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


def history_html(
    messages: Iterable[Message],
    rows: int,
    results: Mapping[str, ToolResult] | None = None,
    calls: CallText | None = None,
) -> str:
    """``messages`` as one block of HTML; tool results fold into their calls (``results``:
    those of a longer thread these messages are part of), which read in words and as code
    when ``calls`` knows the agent's tools."""
    calls = calls or CallText()
    messages = list(messages)
    if results is None:
        results = {r.call_id: r for m in messages for r in m.tool_results}
    parts: list[str] = []
    for message in messages:
        if message.newer_parts:
            said = f"{len(message.newer_parts)} part(s) {NEWER}"
            parts.append(_block(esc(said), "loom-newer"))
        if message.role == "user":
            parts.append(_div(user_html(message.text), "loom-user"))
        elif message.role == "assistant":
            if message.text:
                parts.append(_div(markdown_html(message.text), "loom-assistant"))
            parts.extend(_call(call, results.get(call.id), calls) for call in message.tool_calls)
        else:
            for result in message.tool_results:
                # a saved frame: only the rows shown are decoded
                head = result.frame_head(rows)
                if head is not None:
                    parts.append(_block(head_html(head, result.name), "loom-frame"))
                elif result.chart is not None:
                    parts.append(_block(chart_html(result.chart), "loom-chart"))
                elif result.approval == "rejected":
                    parts.append(_block(rejected_html(result.name), "loom-rejected"))
                elif result.is_error:
                    parts.append(_block(failed_html(result.name, result.error or ""), "loom-error"))
            parts.extend(
                _block(interrupted_html(n.text), "loom-interrupted") for n in message.interruptions
            )
    return "".join(parts)


def _div(inner: str, kind: str) -> str:
    return f'<div class="loom-message {kind}" style="margin:4px 0">{inner}</div>'


def _block(inner: str, kind: str) -> str:
    return f'<div class="{kind}" style="margin:4px 0">{inner}</div>'


def _call(call: ToolCall, result: ToolResult | None, calls: CallText) -> str:
    return (
        '<details class="loom-tool-call" style="margin:4px 0">'
        f"<summary>{esc(summary(calls.words(call), result))}</summary>"
        f"{body_html(call, calls.code(call), result)}</details>"
    )
