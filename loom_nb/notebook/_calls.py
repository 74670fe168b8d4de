"""A tool call as the thread view shows it: folded, the query in words; unfolded, the code
that reproduces it first, then the raw arguments and the exact text the model saw, folded."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loom_nb._code import CodeContext, call_code, call_words
from loom_nb._messages import ToolCall, ToolResult
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
    """The folded line as text, with the approval outcome when there is one."""
    badge = f" · {result.approval}" if result is not None and result.approval else ""
    return f"{words}{badge}"


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
