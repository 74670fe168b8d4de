"""A tool call as the thread view shows it: folded, the query in words; unfolded, the code
that reproduces it first, then the raw arguments and the exact text the model saw, folded."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loom_nb._code import CodeContext, call_code, call_words
from loom_nb._counts import counts_text
from loom_nb._messages import ToolCall, ToolResult
from loom_nb._tables.filter_text import page_words
from loom_nb._tools import Tool
from loom_nb.notebook._html import esc, pre, to_json

#: What the model saw of a result, shown up to this many characters.
_MODEL_TEXT = 4000
_CODE_STYLE = (
    "white-space:pre-wrap;margin:2px 0;padding:4px 6px;background:#f7f7f9;"
    "border-left:3px solid #6c8ebf;font-size:90%"
)


class CallText:
    """The words and the code of the calls of one thread, from the agent's tools."""

    def __init__(
        self, tools: Mapping[str, Tool] | None = None, *, agent: str = "", thread_id: str = ""
    ) -> None:
        self.tools = tools or {}
        self.agent = agent
        self.thread_id = thread_id

    def words(self, call: ToolCall) -> str:
        """The folded line: ``frames_select · orders · total > 100 · 50 rows``."""
        return call_words(call, self.tools.get(call.name))

    def code(self, call: ToolCall) -> str | None:
        """The code that reproduces ``call`` (its result in ``result``), or None."""
        ctx = CodeContext("result", agent=self.agent, thread_id=self.thread_id)
        return call_code(call, self.tools.get(call.name), ctx)


def summary(words: str, result: ToolResult | None) -> str:
    """The folded line as text: with what came back when the result counts its rows (``3
    rows (limit 50)``, ``50 of 53 groups (frame_rows=50 cut it)``: the page the model asked
    for, in the words, gives way to it), and the approval outcome when there is one."""
    badge = f" · {result.approval}" if result is not None and result.approval else ""
    if result is not None and result.rule:  # decided by a rule, not a click: which one
        word = "approved" if result.approval == "rule" else str(result.approval)
        badge = f" · {word} by rule {result.rule}"
    found = result_counts(result)
    if found is not None:
        asked = page_words(found.get("limit"), found.get("offset", 0))
        if asked and words.endswith(f" · {asked}"):
            words = words[: -len(asked) - 3]
        words = f"{words} · {counts_text(found)}"
    return f"{words}{badge}"


def result_counts(result: ToolResult | None) -> dict[str, Any] | None:
    """The counts a table tool saved with its frame (without decoding a saved frame)."""
    if result is None or result.is_error:
        return None
    head = result.frame_head(0)
    return head.counts if head is not None else None


def body_html(call: ToolCall, code: str | None, result: ToolResult | None) -> str:
    """The unfolded call: its code, then the raw arguments and what the model saw, folded."""
    parts = []
    if code is not None:
        parts.append(f'<pre class="loom-code" style="{_CODE_STYLE}">{esc(code)}</pre>')
    arguments: Any = call.arguments if call.arguments is not None else call.raw_arguments or ""
    raw = to_json(arguments) if call.arguments is not None else str(arguments)
    parts.append(_fold("arguments", pre(raw), open_=code is None))
    if result is not None:
        parts.append(_fold("what the model saw", pre(result.content[:_MODEL_TEXT])))
    return "".join(parts)


def _fold(title: str, inner: str, *, open_: bool = False) -> str:
    opened = " open" if open_ else ""
    return (
        f'<details class="loom-call-{title.split()[0]}"{opened} style="margin:2px 0">'
        f'<summary style="color:#555;font-size:90%">{esc(title)}</summary>{inner}</details>'
    )
