"""A thread as a notebook that redoes it without the agent.

The conversation becomes markdown cells; each tool call the code its tool writes for it
(``Tool.code``: pandas for frames, supabase-py for Supabase, a chart's plotting code), which
assigns the call's result to ``result_N`` (N counts the thread's tool calls from 1) and shows
it. Writes are written as comments with what the user decided, so running the notebook never
writes. The first cells say which variables the code expects (each table's DataFrame under the
table's name, a client factory by its name) and check that they are defined.

``.ipynb`` is written with nbformat, ``.py`` (a jupytext percent script) and ``.md`` with
jupytext: both in the ``jupyter`` extra, imported only here, when a thread is exported.

What the model and the data wrote is text in the export, never code: in comments through
``comment_text``, in strings through ``py_literal``, in markdown through ``markdown_text``. The
export then checks itself: the file's code cells, read back by jupytext (nbformat for
``.ipynb``), must be the cells it meant to write, each Python that parses, or nothing is
written. Nor is a file written over that loom_nb did not write or that changed since: the
metadata holds the digest of the file as written, and such a path gets the next free name.
"""

from __future__ import annotations

import ast
import hashlib
import itertools
import json
import os
import re
import secrets
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loom_nb import _codec, _words
from loom_nb._code import (
    CodeContext,
    SavedContext,
    call_code,
    call_words,
    comment_text,
    markdown_code,
    markdown_text,
    parses_kept,
    py_literal,
)
from loom_nb._counts import words_with_counts
from loom_nb._errors import MissingExtra, UserError
from loom_nb._messages import CallState, Thread, ToolCall, ToolResult
from loom_nb._numbers import TracedNumber, by_message, is_check_call, trace_numbers, unmatched
from loom_nb._tools import Tool

#: The formats, by the path's suffix: what jupytext calls them (None: nbformat).
FORMATS: dict[str, str | None] = {".ipynb": None, ".py": "py:percent", ".md": "md"}


@dataclass
class Cell:
    kind: str  # "markdown" or "code"
    source: str
    #: Shown folded (its input hidden until clicked): the helpers' code, before the story.
    folded: bool = False


@dataclass
class Exported:
    """The cells of an exported thread, and which variable holds each call's result."""

    cells: list[Cell]
    #: call id -> the variable its code assigns (only calls whose code runs).
    results: dict[str, str] = field(default_factory=dict)


def export_thread(
    thread: Thread, tools: Mapping[str, Tool], path: str | Path, *, mark_numbers: bool = True
) -> Path:
    """Write ``thread`` as a notebook at ``path`` (``.ipynb``, ``.py`` or ``.md``); where
    ``path`` holds a file that is not an export as loom_nb wrote it (a person wrote or changed
    it), at the first free ``path-2``, ``path-3``, ... instead. Returns the path written.
    ``mark_numbers=False`` (the agent's ``check_numbers="off"``): no "in no result" lines."""
    target = Path(path)
    fmt = _format(target)
    with _codec.collector_paused():  # writing the code decodes every frame of the thread
        exported = thread_cells(thread, tools, mark_numbers=mark_numbers)
        text = _sealed(_notebook(exported, thread, fmt), fmt)
        _check(text, fmt, exported, thread)
    target = _free(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, target)  # whole or not at all
    return target


def thread_cells(
    thread: Thread, tools: Mapping[str, Tool], *, mark_numbers: bool = True
) -> Exported:
    """The cells of ``thread``: its messages in order, each tool call as its code; each
    answer's numbers in no result named under it (unless ``mark_numbers=False``)."""
    with parses_kept():  # each call's arguments are parsed for its words and its code
        body = _Body(thread, tools, frozenset(), mark_numbers)
        if body.bound & body.expected.keys():  # a table named like a helper or scratch variable
            body = _Body(thread, tools, frozenset(body.expected), mark_numbers)
    body.exported.cells = [
        Cell("markdown", _title(thread, body.expected)),
        Cell(
            "code",
            _setup(body.expected, body.setups),
            folded=any(not _is_import(s) for s in body.setups),
        ),
        *body.cells,
    ]
    return body.exported


class _Body:
    """The cells of the thread's messages, and what their code expects, sets up and binds;
    the code binds no name in ``taken``."""

    def __init__(
        self,
        thread: Thread,
        tools: Mapping[str, Tool],
        taken: frozenset[str],
        mark_numbers: bool = True,
    ) -> None:
        results = {r.call_id: r for r in thread.tool_results()}
        pending = {p.call_id: p.state for p in thread.pending}
        self.exported = Exported([])
        self.expected: dict[str, str] = {}
        self.setups: list[str] = []
        self.bound: set[str] = set()
        self.cells: list[Cell] = []
        number = 0
        shared: dict[Any, Any] = {}  # what the calls' code hooks share (``_code.shared``)
        start = ""  # what the ids of exported.results all start with
        missing = by_message(unmatched(trace_numbers(thread))) if mark_numbers else {}
        for at, message in enumerate(thread.messages):
            if message.role == "user" and message.text:
                self.cells.append(Cell("markdown", _said("You", message.text)))
            elif message.role == "assistant":
                if message.text:
                    said = _said(thread.agent, message.text) + _no_result(missing.get(at, []))
                    self.cells.append(Cell("markdown", said))
                for call in message.tool_calls:
                    if is_check_call(call.id):  # loom_nb's own, no code: its answer follows
                        continue
                    number += 1
                    ctx = SavedContext(
                        f"result_{number}",
                        results=dict(self.exported.results),
                        saved=results.get(call.id),
                        shared=shared,
                        agent=thread.agent,
                        thread_id=thread.id,
                        user_id=thread.user_id,
                        taken=taken,
                    )
                    tool = tools.get(call.name)
                    cell, runs = _call_cell(
                        number, call, tool, results.get(call.id), pending.get(call.id), ctx, start
                    )
                    self.cells.append(cell)
                    self.bound |= ctx.bound
                    if runs:
                        self.exported.results[call.id] = ctx.result
                        earlier = len(self.exported.results) > 1
                        start = _common_start(start, call.id) if earlier else call.id
                        for name, about in ctx.expected.items():
                            self.expected.setdefault(name, about)
                    # A comment's imports too, so that it runs once uncommented (its other
                    # setups may read variables that only running code makes the notebook ask for)
                    setups = ctx.setups if runs else [s for s in ctx.setups if _is_import(s)]
                    self.setups.extend(s for s in setups if s not in self.setups)


def _common_start(a: str, b: str) -> str:
    """What ``a`` and ``b`` both start with."""
    pairs = enumerate(zip(a, b, strict=False))
    return a[: next((i for i, (x, y) in pairs if x != y), min(len(a), len(b)))]


def _counts_of(result: ToolResult | None) -> dict[str, Any] | None:
    """The counts a table tool saved with its frame (a stored frame is not decoded for them)."""
    if result is None or result.is_error:
        return None
    outline = result._frame_outline()
    return outline[1] if outline is not None else None


def _call_cell(
    number: int,
    call: ToolCall,
    tool: Tool | None,
    result: ToolResult | None,
    pending: CallState | None,
    ctx: CodeContext,
    ids_start: str = "",
) -> tuple[Cell, bool]:
    """The call's cell, and whether its code runs (a read that worked) or is a comment;
    ``ids_start``: what the ids of ``ctx.results`` all start with."""
    words = call_words(call, tool)
    # words without the ids' common start ("call_") name none of them: no id looked for
    for call_id, variable in ctx.results.items() if ids_start in words else ():
        if call_id in words:  # "bar of result_1", as the code reads; no pattern for each
            words = re.sub(rf"(?<![\w-]){re.escape(call_id)}(?![\w-])", variable, words)
    # one line, with what came back as the call header says it: 3 rows (limit 50), 53 groups
    head = f"# Call {number} · {comment_text(words_with_counts(words, _counts_of(result)))}"
    code = call_code(call, tool, ctx)
    if code is None:
        if tool is None:
            note = "no such tool in this agent"
        elif tool.code is None:
            note = "its tool writes no code"
        else:  # the arguments were refused, or it works on a result that has no code
            note = "no code reproduces this call"
        said = markdown_code(call_words(call, tool))
        return Cell("markdown", f"*Call {number}* · {said} ({note})"), False
    write = (result is not None and result.approval is not None) or (
        tool is not None and tool.needs_approval is not False
    )
    if write:
        outcome = _write_outcome(result, pending)
        return Cell(
            "code", f"{head}\n# A write, {comment_text(outcome)}.\n{_commented(code)}"
        ), False
    if result is not None and result.is_error:
        failed = comment_text(" ".join((result.error or "").split())[:300])
        return Cell("code", f"{head}\n# It failed: {failed}\n{_commented(code)}"), False
    return Cell("code", f"{head}\n{code}\n{ctx.result}"), True


#: What an export says of a rejected write.
_REJECTED = f"rejected by the user: {_words.NOTHING_DONE}"
#: What an export says of a write that had no result yet, by its state in the thread.
_UNFINISHED = {
    None: "never run",
    "pending": "waiting for approval when this was exported",
    "approved": "approved, waiting for the other calls of its turn when this was exported",
    "rejected": _REJECTED,
    "running": "running when this was exported",
    "unknown": "of unknown outcome when this was exported (the kernel stopped while it ran): "
    "check whether it wrote",
    "done": "done; its result was not saved when this was exported",
}


def _write_outcome(result: ToolResult | None, pending: CallState | None) -> str:
    if result is None:
        return _UNFINISHED[pending]
    if result.approval == "rejected":
        return _REJECTED
    decided = "approved by the user" if result.approval == "approved" else "run without approval"
    if result.is_error:
        return f"{decided}; it failed: {' '.join((result.error or '').split())[:200]}"
    return f"{decided}, and done. Uncomment it to write again"


def _commented(code: str) -> str:
    return "\n".join(f"# {line}" if line else "#" for line in code.splitlines())


def _no_result(numbers: Sequence[TracedNumber]) -> str:
    """The line under an answer that names its numbers in no result (none: "")."""
    if not numbers:
        return ""
    listed = ", ".join(markdown_code(t) for t in dict.fromkeys(n.text for n in numbers))
    return f"\n\n> ⚠ *loom_nb: in no result:* {listed} (no tool result shows or gives it)"


def _said(who: str, text: str) -> str:
    return f"**{markdown_text(who, one_line=True)}:**\n\n{markdown_text(text)}"


def _title(thread: Thread, expected: Mapping[str, str]) -> str:
    title = markdown_text(thread.title or "Thread " + thread.id, one_line=True)
    lines = [
        f"# {title}",
        "",
        f"Exported by loom_nb from thread {markdown_code(thread.id)} of agent "
        f"{markdown_code(thread.agent)}. Each tool call is the code that reproduces its result "
        "(`result_N` for call N); writes are comments that say what the user decided.",
    ]
    usage = thread.usage
    if not usage.empty:  # loom_nb's own numbers: no text of the model or the data
        lines += ["", f"Model usage of the thread: {usage.line()}."]
    if expected:
        lines += ["", "Define these variables before running it:", ""]
        lines += [
            f"- {markdown_code(name)}: {markdown_text(about, one_line=True)}"
            for name, about in expected.items()
        ]
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


def _notebook(exported: Exported, thread: Thread, fmt: str | None) -> Any:
    nbformat = _nbformat()
    nb = nbformat.v4.new_notebook()
    # The cells as nbformat.v4's new_*_cell make them, without validating each one: the
    # notebook is validated once, when it is written (``_one_of_each_shape``).
    ids = _cell_ids(len(exported.cells))
    nb.cells = [_cell(nbformat, c, i) for c, i in zip(exported.cells, ids, strict=True)]
    nb.metadata["kernelspec"] = {  # as ipykernel's own, which JupyterLab would write back
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    }
    nb.metadata["language_info"] = _language_info()
    # escaped as a comment is: a text format's header is comment lines
    nb.metadata["loom_nb"] = {
        "thread_id": comment_text(thread.id),
        "agent": comment_text(thread.agent),
    }
    if fmt is not None:  # jupytext keeps only the metadata it is told to
        nb.metadata["jupytext"] = {"notebook_metadata_filter": "loom_nb"}
    return nb


def _cell(nbformat: Any, cell: Cell, cell_id: str) -> Any:
    node = nbformat.NotebookNode  # what nbformat.from_dict makes of the cell's dict
    metadata = node(jupyter=node(source_hidden=True)) if cell.folded else node()
    if cell.kind == "markdown":
        return node(id=cell_id, cell_type="markdown", source=cell.source, metadata=node())
    return node(
        id=cell_id,
        cell_type="code",
        source=cell.source,
        metadata=metadata,
        execution_count=None,
        outputs=[],
    )


def _cell_ids(n: int) -> list[str]:
    """``n`` distinct random cell ids, as nbformat makes them (8 hex digits), made at once."""
    digits = secrets.token_hex(4 * n)
    ids = list(dict.fromkeys(digits[i : i + 8] for i in range(0, len(digits), 8)))
    while len(ids) < n:  # one in 10^5 exports of 250 cells
        ids = list(dict.fromkeys([*ids, secrets.token_hex(4)]))
    return ids


def _language_info() -> dict[str, Any]:
    """ipykernel's own for this Python: JupyterLab writes the kernel's into a notebook it
    opens, marking it modified unless it holds that already."""
    major = sys.version_info[0]
    return {
        "codemirror_mode": {"name": "ipython", "version": major},
        "file_extension": ".py",
        "mimetype": "text/x-python",
        "name": "python",
        "nbconvert_exporter": "python",
        "pygments_lexer": f"ipython{major}",
        "version": sys.version.split()[0],  # as ipykernel reads it
    }


def _writes(notebook: Any, fmt: str | None) -> str:
    _nbformat().validate(_one_of_each_shape(notebook))  # a failure is a loom_nb bug
    text: str = _ipynb_text(notebook) if fmt is None else _jupytext().writes(notebook, fmt=fmt)
    return text if text.endswith("\n") else text + "\n"


def _one_of_each_shape(notebook: Any) -> Any:
    """The notebook with only the first cell of each shape: cells of one shape differ in
    their text (nbformat's schema takes any text) and their id (distinct, made by
    ``_cell_ids``; one nbformat refuses is a shape of its own), so each passes its schema as
    the first of its shape does. A third of an export's writing time was nbformat checking
    every cell of a long thread alike."""
    first: dict[str, Any] = {}
    for cell in notebook["cells"]:
        rest = {k: v for k, v in cell.items() if k not in ("source", "id")}
        valid = type(cell.get("source")) is str and bool(_CELL_ID.fullmatch(cell.get("id", "")))
        first.setdefault(repr((rest, valid)), cell)
    return _nbformat().from_dict({**notebook, "cells": list(first.values())})


#: A cell id as nbformat's schema wants it.
_CELL_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def _ipynb_text(notebook: Any) -> str:
    """What nbformat.v4's writer (where nbformat.writes ends) writes for this notebook, less
    its deep copy of it first (the copy is most of its time; this notebook is written once).

    json's indenting writer is Python, a generator step for each value: the cells (most of
    the text) are written here instead, their strings by json's C encoder, each into the
    placeholder the rest of the notebook holds for it."""
    token = secrets.token_hex(16)  # in the text once: no model text can hold it
    cells = notebook["cells"]
    skeleton = _JSON.encode({**notebook, "cells": [f"{token}:{i}" for i in range(len(cells))]})

    def cell(match: re.Match[str]) -> str:
        return match.group(1) + _cell_json(cells[int(match.group(2))], len(match.group(1)))

    return re.sub(rf'(?m)^( *)"{token}:(\d+)"', cell, skeleton)


#: The JSON nbformat.v4 writes (``nbjson.JSONWriter``), and a string as it writes it.
_JSON = json.JSONEncoder(indent=1, sort_keys=True, separators=(",", ": "), ensure_ascii=False)
_json_string = json.encoder.encode_basestring


def _cell_json(cell: Mapping[str, Any], depth: int) -> str:
    """One cell as nbformat.v4 writes it ``depth`` spaces in: its source as its lines."""
    inner = " " * (depth + 1)
    items = []
    for key in sorted(cell):
        value = cell[key]
        if key == "source" and isinstance(value, str):
            lines = value.splitlines(True)
            text = "[]"
            if lines:
                listed = ",\n".join(f"{inner} {_json_string(line)}" for line in lines)
                text = f"[\n{listed}\n{inner}]"
        elif isinstance(value, str):
            text = _json_string(value)
        elif value is None or value == {} or value == []:
            text = "null" if value is None else "{}" if value == {} else "[]"
        else:  # a JSON string holds no line break: each line is indented as it would be
            text = _JSON.encode(value).replace("\n", "\n" + inner)
        items.append(f"{inner}{_json_string(key)}: {text}")
    return "{\n" + ",\n".join(items) + "\n" + " " * depth + "}"


def _read_code(text: str, fmt: str | None) -> list[str]:
    """The code cells' sources of the notebook in ``text``, as Jupyter reads them: for
    ``.ipynb`` its JSON (a source may be a list of lines, joined as nbformat joins them),
    else as jupytext reads the text."""
    if fmt is not None:
        return [c.source for c in _jupytext().reads(text, fmt).cells if c.cell_type == "code"]
    return [
        "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        for c in json.loads(text)["cells"]
        if c["cell_type"] == "code"
    ]


def _metadata(text: str, fmt: str | None) -> Any:
    """The notebook metadata in ``text`` (of ``.ipynb``: its JSON's, nothing else read)."""
    if fmt is not None:
        return _jupytext().reads(text, fmt).metadata
    # As nbformat writes it (indent 1), the top-level key is the one at the start of a line
    # with one space: the JSON from there is read alone, not the cells before it.
    at = text.rfind('\n "metadata": {')
    if at < 0:
        return json.loads(text)["metadata"]
    return json.JSONDecoder().raw_decode(text, at + len('\n "metadata": '))[0]


# ---- the export checks itself --------------------------------------------------------------


def _check(text: str, fmt: str | None, exported: Exported, thread: Thread) -> None:
    """Refuse (writing nothing) unless ``text``, read back, has exactly the code cells meant,
    each of them Python."""
    meant = [c.source for c in exported.cells if c.kind == "code"]
    read = _read_code(text, fmt)
    problem = None
    if read != meant:
        problem = f"{len(read)} code cells read back where {len(meant)} were written"
        for n, (got, want) in enumerate(zip(read, meant, strict=False), start=1):
            if got != want:
                problem = f"code cell {n} reads back changed"
                break
    else:
        for n, source in enumerate(meant, start=1):
            try:
                compile(source, f"<cell {n}>", "exec", _PARSE_FLAGS, dont_inherit=True)
            except (SyntaxError, ValueError) as exc:
                problem = f"code cell {n} is not Python ({exc})"
                break
    if problem is not None:
        raise UserError(
            f"did not export thread {thread.id!r} as {fmt or 'ipynb'}: {problem}, so the file "
            "would not hold only the code the tools wrote. Nothing was written; please report "
            "this as a loom_nb bug (or of the tool whose code hook wrote that cell)"
        )


#: A cell compiled as a notebook runs it, top-level ``await`` allowed (an async client
#: factory's calls are awaited); to bytecode, not to an ``ast``: that is stricter (``return``
#: outside a function is refused) and takes half the time.
_PARSE_FLAGS = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT


# ---- never over a user's work ----------------------------------------------------------------

#: The digest of the file as written, with the digest itself read as this.
_UNSEALED = "sha256:" + "0" * 64
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def _sealed(notebook: Any, fmt: str | None) -> str:
    """The notebook's text with the digest of that text in its metadata (the digest read as
    ``_UNSEALED``), so that a later export can tell the file as written from the file edited."""
    token = "sha256:" + secrets.token_hex(32)  # in the text once: no model text can hold it
    notebook.metadata["loom_nb"]["digest"] = token
    text = _writes(notebook, fmt)
    return text.replace(token, _digest(text.replace(token, _UNSEALED)))


def _digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def written_by_loom(path: Path) -> str | None:
    """The thread id of the export at ``path`` when the file is as loom_nb wrote it, else None
    (no such file, another file, an export someone changed since)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    for digest in set(_DIGEST.findall(text)):
        if text.count(digest) == 1 and _digest(text.replace(digest, _UNSEALED)) == digest:
            try:
                thread_id = _metadata(text, _format(path))["loom_nb"]["thread_id"]
            except Exception:  # sealed but unreadable: not a file to write over
                return None
            return thread_id if isinstance(thread_id, str) else None
    return None


def _free(path: Path) -> Path:
    """``path``, or the first of ``path-2``, ``path-3``, ... that holds no file or an export
    as loom_nb wrote it (nothing a person wrote or changed)."""
    for n in itertools.count(1):
        candidate = path if n == 1 else path.with_name(f"{path.stem}-{n}{path.suffix}")
        if not candidate.exists() or written_by_loom(candidate) is not None:
            return candidate
    raise AssertionError("unreachable")  # pragma: no cover


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
