"""A thread as a notebook that redoes it without the agent.

The conversation becomes markdown cells; each tool call the code its tool writes for it
(``Tool.code``: pandas for frames, supabase-py for Supabase, a chart's plotting code), which
assigns the call's result to ``result_N`` (N counts the thread's tool calls from 1) and shows
it. Writes are written as comments with what the user decided, so running the notebook never
writes. The first cells say which variables the code expects (each table's DataFrame under the
table's name, a client factory by its name) and check that they are defined.

``.ipynb`` is written with nbformat, ``.py`` (a jupytext percent script) and ``.md`` with
jupytext: both in the ``jupyter`` extra, imported only here, when a thread is exported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loom_nb._code import CodeContext, call_code, call_words, py_literal
from loom_nb._errors import MissingExtra, UserError
from loom_nb._messages import CallState, Thread, ToolCall, ToolResult
from loom_nb._tools import Tool

#: The formats, by the path's suffix: what jupytext calls them (None: nbformat).
FORMATS: dict[str, str | None] = {".ipynb": None, ".py": "py:percent", ".md": "md"}


@dataclass
class Cell:
    kind: str  # "markdown" or "code"
    source: str


@dataclass
class Exported:
    """The cells of an exported thread, and which variable holds each call's result."""

    cells: list[Cell]
    #: call id -> the variable its code assigns (only calls whose code runs).
    results: dict[str, str] = field(default_factory=dict)


def export_thread(thread: Thread, tools: Mapping[str, Tool], path: str | Path) -> Path:
    """Write ``thread`` as a notebook at ``path`` (``.ipynb``, ``.py`` or ``.md``)."""
    target = Path(path)
    fmt = _format(target)
    exported = thread_cells(thread, tools)
    notebook = _notebook(exported, thread)
    text = _nbformat().writes(notebook) if fmt is None else _jupytext().writes(notebook, fmt=fmt)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    return target


def thread_cells(thread: Thread, tools: Mapping[str, Tool]) -> Exported:
    """The cells of ``thread``: its messages in order, each tool call as its code."""
    body = _Body(thread, tools, frozenset())
    if body.bound & body.expected.keys():  # a table named like a helper or scratch variable
        body = _Body(thread, tools, frozenset(body.expected))
    body.exported.cells = [
        Cell("markdown", _title(thread, body.expected)),
        Cell("code", _setup(body.expected, body.setups)),
        *body.cells,
    ]
    return body.exported


class _Body:
    """The cells of the thread's messages, and what their code expects, sets up and binds;
    the code binds no name in ``taken``."""

    def __init__(self, thread: Thread, tools: Mapping[str, Tool], taken: frozenset[str]) -> None:
        results = {r.call_id: r for r in thread.tool_results()}
        pending = {p.call_id: p.state for p in thread.pending}
        self.exported = Exported([])
        self.expected: dict[str, str] = {}
        self.setups: list[str] = []
        self.bound: set[str] = set()
        self.cells: list[Cell] = []
        number = 0
        for message in thread.messages:
            if message.role == "user" and message.text:
                self.cells.append(Cell("markdown", _said("You", message.text)))
            elif message.role == "assistant":
                if message.text:
                    self.cells.append(Cell("markdown", _said(thread.agent, message.text)))
                for call in message.tool_calls:
                    number += 1
                    ctx = CodeContext(
                        f"result_{number}",
                        results=dict(self.exported.results),
                        data=getattr(results.get(call.id), "data", None),
                        agent=thread.agent,
                        thread_id=thread.id,
                        user_id=thread.user_id,
                        taken=taken,
                    )
                    tool = tools.get(call.name)
                    cell, runs = _call_cell(
                        number, call, tool, results.get(call.id), pending.get(call.id), ctx
                    )
                    self.cells.append(cell)
                    self.bound |= ctx.bound
                    if runs:
                        self.exported.results[call.id] = ctx.result
                        for name, about in ctx.expected.items():
                            self.expected.setdefault(name, about)
                    # A comment's imports too, so that it runs once uncommented (its other
                    # setups may read variables that only running code makes the notebook ask for)
                    setups = ctx.setups if runs else [s for s in ctx.setups if _is_import(s)]
                    self.setups.extend(s for s in setups if s not in self.setups)


def _call_cell(
    number: int,
    call: ToolCall,
    tool: Tool | None,
    result: ToolResult | None,
    pending: CallState | None,
    ctx: CodeContext,
) -> tuple[Cell, bool]:
    """The call's cell, and whether its code runs (a read that worked) or is a comment."""
    words = call_words(call, tool).replace("\r", "\\r").replace("\n", "\\n")  # one line
    head = f"# Call {number} · {words}"
    code = call_code(call, tool, ctx)
    if code is None:
        if tool is None:
            note = "no such tool in this agent"
        elif tool.code is None:
            note = "its tool writes no code"
        else:  # the arguments were refused, or it works on a result that has no code
            note = "no code reproduces this call"
        return Cell("markdown", f"*Call {number}* · `{_inline(words)}` ({note})"), False
    write = (result is not None and result.approval is not None) or (
        tool is not None and tool.needs_approval is not False
    )
    if write:
        outcome = _write_outcome(result, pending)
        return Cell("code", f"{head}\n# A write, {outcome}.\n{_commented(code)}"), False
    if result is not None and result.is_error:
        failed = " ".join((result.error or "").split())[:300]
        return Cell("code", f"{head}\n# It failed: {failed}\n{_commented(code)}"), False
    return Cell("code", f"{head}\n{code}\n{ctx.result}"), True


#: What an export says of a write that had no result yet, by its state in the thread.
_UNFINISHED = {
    None: "never run",
    "pending": "waiting for approval when this was exported",
    "approved": "approved, waiting for the other calls of its turn when this was exported",
    "rejected": "rejected by the user: nothing was written",
    "running": "running when this was exported",
    "unknown": "of unknown outcome when this was exported (the kernel stopped while it ran): "
    "check whether it wrote",
    "done": "done; its result was not saved when this was exported",
}


def _write_outcome(result: ToolResult | None, pending: CallState | None) -> str:
    if result is None:
        return _UNFINISHED[pending]
    if result.approval == "rejected":
        return "rejected by the user: nothing was written"
    decided = "approved by the user" if result.approval == "approved" else "run without approval"
    if result.is_error:
        return f"{decided}; it failed: {' '.join((result.error or '').split())[:200]}"
    return f"{decided}, and done. Uncomment it to write again"


def _commented(code: str) -> str:
    return "\n".join(f"# {line}" if line else "#" for line in code.splitlines())


def _inline(text: str) -> str:
    return text.replace("`", "'")


def _said(who: str, text: str) -> str:
    return f"**{who}:**\n\n{text}"


def _title(thread: Thread, expected: Mapping[str, str]) -> str:
    lines = [
        f"# {thread.title or 'Thread ' + thread.id}",
        "",
        f"Exported by loom_nb from thread `{thread.id}` of agent `{thread.agent}`. "
        "Each tool call is the code that reproduces its result (`result_N` for call N); "
        "writes are comments that say what the user decided.",
    ]
    if expected:
        lines += ["", "Define these variables before running it:", ""]
        lines += [f"- `{name}`: {about}" for name, about in expected.items()]
    return "\n".join(lines)


def _setup(expected: Mapping[str, str], setups: list[str]) -> str:
    lines = []
    if expected:
        names = py_literal(list(expected))
        missing = "missing"
        while missing in expected:
            missing += "_"
        lines += [
            "# The variables this notebook expects (see above)",
            f"{missing} = [name for name in {names} if name not in globals()]",
            f"if {missing}:",
            f'    raise NameError(f"define {{{missing}}} before running this notebook")',
        ]
    imports = [s for s in setups if _is_import(s)]
    others = [s for s in setups if not _is_import(s)]
    blocks = ["\n".join(dict.fromkeys(imports))] if imports else []
    blocks += ["\n".join(lines)] if lines else []
    blocks += others
    return (
        "\n\n".join(blocks) if blocks else "# Nothing to define: no call of this thread reads data"
    )


def _is_import(code: str) -> bool:
    return "\n" not in code and code.startswith(("import ", "from "))


def _format(path: Path) -> str | None:
    if path.suffix not in FORMATS:
        raise UserError(
            f"cannot export to {str(path)!r}: name a .ipynb notebook, a .py script (jupytext "
            "percent format) or a .md file"
        )
    return FORMATS[path.suffix]


def _notebook(exported: Exported, thread: Thread) -> Any:
    nbformat = _nbformat()
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell(c.source)
        if c.kind == "markdown"
        else nbformat.v4.new_code_cell(c.source)
        for c in exported.cells
    ]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.metadata["language_info"] = {"name": "python"}
    nb.metadata["loom_nb"] = {"thread_id": thread.id, "agent": thread.agent}
    return nb


def _nbformat() -> Any:
    try:
        import nbformat
    except ImportError:
        raise MissingExtra("nbformat", "jupyter", "exporting a thread") from None
    return nbformat


def _jupytext() -> Any:
    try:
        import jupytext
    except ImportError:
        raise MissingExtra("jupytext", "jupyter", "exporting a thread as .py or .md") from None
    return jupytext
