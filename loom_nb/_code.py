"""Tool calls read as words and as code.

A tool may describe a call in words (``describe(arguments) -> str | None``: the folded line of
the thread view) and write the code that reproduces it (``code(arguments, ctx) -> str | None``:
shown when unfolded, and what ``export`` writes). The table connectors supply both; a custom
tool without them reads as ``name({"arg": value})``.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import html
import json
import keyword
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from loom_nb import _codec
from loom_nb._messages import ToolCall, ToolResult


@dataclass
class CodeContext:
    """What a tool's ``code`` hook is given, and where it says what its code needs.

    The code assigns the call's result to :attr:`result`. Names the user must define (a
    DataFrame, a client factory) are declared with :meth:`expect`; imports and helpers that
    the code uses with :meth:`setup` (an export puts each once in its first cell). A tool
    that works on an earlier result (a chart of a fetched frame) names it with
    :meth:`result_of` (the call id it was given); :attr:`data` is the call's own saved result,
    when it is known. The variables and helpers the code binds itself (a scratch mask, a
    helper function) are named with :meth:`name`, which keeps clear of the variables the
    notebook expects (a table called ``groups`` keeps its frame).
    """

    #: The variable the code assigns the call's result to.
    result: str = "result"
    #: The variables holding earlier calls' results, by call id (a chart names its data so).
    results: Mapping[str, str] = field(default_factory=dict)
    #: The call's saved result data, when it is known (a DataFrame for a table read, the
    #: spec of a chart for a chart call: an export passes it).
    data: Any = None
    #: The run the call was part of (a client factory is called with a context of it).
    agent: str = ""
    thread_id: str = ""
    user_id: str | None = None
    #: Names the code must not bind: the variables the whole notebook expects.
    taken: frozenset[str] = frozenset()
    expected: dict[str, str] = field(default_factory=dict)
    setups: list[str] = field(default_factory=list)
    #: The names :meth:`name` gave out.
    bound: set[str] = field(default_factory=set)

    def expect(self, name: str, about: str) -> str:
        """Declare that the code reads variable ``name`` (``about`` says what it holds)."""
        self.expected.setdefault(name, about)
        return name

    def name(self, preferred: str) -> str:
        """A name for a variable or helper the code binds: ``preferred``, with ``_`` added
        while an expected variable has it."""
        name = identifier(preferred)
        self.bound.add(name)
        while name in self.taken or name in self.expected:
            name += "_"
        return name

    def setup(self, code: str) -> None:
        """Code the call's code relies on (``import pandas as pd``, a helper function)."""
        if code not in self.setups:
            self.setups.append(code)

    def result_of(self, call_id: str) -> str | None:
        """The variable of an earlier call's result, or None when that call has none."""
        return self.results.get(call_id)

    def _outline(self) -> tuple[Any, dict[str, Any] | None] | None:
        """The saved frame's columns and counts (``_codec.frame_outline``), or None."""
        return _codec.frame_outline(self.data)


class SavedContext(CodeContext):
    """A :class:`CodeContext` whose :attr:`data` is read from the call's saved result when the
    code first reads it: an export gives every call its result, and most code reads none of
    its rows, or only its columns (:func:`saved_columns`), which a stored result gives without
    decoding the frame."""

    def __init__(
        self, result: str, *, saved: ToolResult | None, shared: dict[Any, Any], **fields: Any
    ) -> None:
        super().__init__(result, **fields)
        self.shared = shared
        if saved is not None:  # after: the dataclass's __init__ sets data, which drops it
            self.__dict__["_saved"] = saved

    @property  # type: ignore[override]
    def data(self) -> Any:
        saved: ToolResult | None = self.__dict__.pop("_saved", None)
        if saved is not None:
            self.__dict__["_data"] = saved.chart if saved.chart is not None else saved.data
        return self.__dict__.get("_data")

    @data.setter
    def data(self, value: Any) -> None:
        self.__dict__.pop("_saved", None)
        self.__dict__["_data"] = value

    def _outline(self) -> tuple[Any, dict[str, Any] | None] | None:
        saved: ToolResult | None = self.__dict__.get("_saved")
        if saved is None:
            return super()._outline()
        return saved._frame_outline() if saved.chart is None else None


def shared(ctx: CodeContext) -> dict[Any, Any] | None:
    """What the code hooks of one export's calls share, or None outside an export: what one
    call's code reads of the data as it is now (a column's dtype), the next call's would read
    again. Keys start with the name of the module that sets them."""
    return ctx.shared if isinstance(ctx, SavedContext) else None


def saved_columns(ctx: CodeContext) -> list[str] | None:
    """The columns, as text, of the call's saved DataFrame (None when it saved no frame)."""
    outline = ctx._outline()
    return None if outline is None else [str(c) for c in outline[0]]


_Parse = TypeVar("_Parse", bound=Callable[..., Any])
#: The parses kept while :func:`parses_kept` is on, by their inputs' identities.
_kept: contextvars.ContextVar[dict[tuple[Any, ...], tuple[Any, ...]] | None] = (
    contextvars.ContextVar("loom_nb_parses_kept", default=None)
)


@contextlib.contextmanager
def parses_kept() -> Iterator[None]:
    """Keep each parse of the same arguments against the same tables while on: an export
    parses each call's arguments for its words and again for its code, and changes neither
    (a run never keeps one: what a tool runs is parsed from what it is given)."""
    token = _kept.set({})
    try:
        yield
    finally:
        _kept.reset(token)


def kept_parse(parse: _Parse) -> _Parse:
    """``parse`` (of a tool's arguments), kept by :func:`parses_kept` while it is on."""

    @functools.wraps(parse)
    def kept(*inputs: Any, **named: Any) -> Any:
        memo = _kept.get()
        if memo is None or named:
            return parse(*inputs, **named)
        # the inputs are held with their parse: while it is kept no other object has their ids
        key = (parse.__name__, *map(id, inputs))
        found = memo.get(key)
        if found is not None:
            return found[1]
        parsed = parse(*inputs)
        memo[key] = (inputs, parsed)
        return parsed

    return kept  # type: ignore[return-value]


#: ``describe(arguments)``: the call in words, or None.
Describe = Callable[[dict[str, Any]], "str | None"]
#: ``code(arguments, ctx)``: Python that assigns the call's result to ``ctx.result``, or None.
WriteCode = Callable[[dict[str, Any], CodeContext], "str | None"]


class HasHooks(Protocol):
    """A tool, as far as words and code go (``loom_nb.Tool``)."""

    describe: Describe | None
    code: WriteCode | None


def call_words(call: ToolCall, tool: HasHooks | None) -> str:
    """One line for a folded call: ``frames_select · orders · total > 100 · 50 rows``, or
    ``name(arg=value)`` when the tool gives no words."""
    words = None
    if tool is not None and tool.describe is not None and call.arguments is not None:
        try:
            words = tool.describe(call.arguments)
        except Exception:  # words are a courtesy: a bad hook never breaks the view
            words = None
    if words:
        return f"{call.name} · {words}"
    return plain_call(call)


def call_code(call: ToolCall, tool: HasHooks | None, ctx: CodeContext) -> str | None:
    """The code that reproduces ``call``, or None when its tool writes none."""
    if tool is None or tool.code is None or call.arguments is None:
        return None
    try:
        return tool.code(call.arguments, ctx)
    except Exception:  # arguments the tool refused, a hook that failed: no code to show
        return None


def plain_call(call: ToolCall, limit: int = 200) -> str:
    """``name · arg: value, other: a, b`` (the arguments in words, a nested dict as
    ``key = value``), cut at ``limit`` characters; ``name()`` without arguments, and
    ``name(raw)`` for arguments that did not parse, as they came."""
    if call.arguments is None:
        text = f"{call.name}({call.raw_arguments or ''})"
    elif call.arguments:
        said = ", ".join(f"{key}: {_said(value)}" for key, value in call.arguments.items())
        text = f"{call.name} · {said}"
    else:
        text = f"{call.name}()"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _said(value: Any, depth: int = 0) -> str:
    """An argument's value as words: texts and numbers as they are, lists as their items."""
    if depth < 2 and isinstance(value, dict):
        return ", ".join(f"{k} = {_said(v, depth + 1)}" for k, v in value.items())
    if depth < 2 and isinstance(value, list):
        return ", ".join(_said(v, depth + 1) for v in value)
    if isinstance(value, dict | list):
        return json.dumps(value, default=str, ensure_ascii=False)
    return str(value)


#: Names the exported code itself relies on (imports, builtins it calls): a user's variable
#: cannot have them.
_CODE_NAMES = frozenset(
    {"pd", "np", "plt", "re", "math", "RunContext", "len", "globals", "float", "NameError"}
)


def variable_for(name: str) -> str:
    """The variable an export reads ``name`` (a table) from: ``name`` itself, unless Python
    cannot use it as a variable (a keyword: ``class``) or the code needs it (``pd``,
    ``len``): then ``name_``."""
    variable = identifier(name)
    return f"{variable}_" if variable in _CODE_NAMES else variable


@functools.lru_cache(maxsize=1024)  # the same few names, for every call of a thread
def identifier(name: str) -> str:
    """``name`` as a Python variable: each character other than an ASCII letter, digit or
    ``_`` made ``_`` (a column called ``total (€)``), ``_`` before a digit, after a keyword."""
    variable = re.sub(r"[^A-Za-z0-9_]", "_", name) or "_"
    if variable[0].isdigit():
        variable = "_" + variable
    return variable + "_" if keyword.iskeyword(variable) else variable


def py_literal(value: Any) -> str:
    """``value`` (a JSON value) as Python source, strings in double quotes where they can be."""
    if isinstance(value, str):
        # A backslash as \x5c: jupytext takes any quote after a backslash for an escaped one,
        # so "a\\" would leave it reading the rest of the file as inside a string
        text = repr(value).replace("\\\\", "\\x5c")
        if text[0] == "'" and '"' not in value:
            text = '"' + text[1:-1] + '"'
        return text
    if isinstance(value, float) and value != value:
        return 'float("nan")'
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return 'float("inf")' if value > 0 else 'float("-inf")'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(py_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{py_literal(k)}: {py_literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


# ---- model and data text in an export ------------------------------------------------------
# Text the model or the data chose reaches exported code only through these two functions and
# ``py_literal`` (whose ``repr`` escapes every character that is not printable). No reader of
# the file (Python, IPython, jupytext's py:percent and md readers, an editor) can then see a
# line break in it: ``str.splitlines()`` breaks at \v, \f, \x1c-\x1e, \x85, U+2028 and
# U+2029 as well as \n and \r.

#: Where ``str.splitlines()`` breaks a line.
LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
#: Characters shown as their escape: controls (all of them line breaks to some reader, or
#: invisible), line and paragraph separators, the bidi overrides that reorder what an editor
#: shows (Trojan Source), and lone surrogates (which UTF-8 cannot write).
_HIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_BREAK = re.compile("\r\n|[" + re.escape(LINE_BREAKS) + "]")
#: A markdown line that a reader could take for something else: a code fence (md), an HTML
#: block or jupytext's ``<!-- #region -->`` (md), a magic, a shell escape or help (IPython, and
#: jupytext, which uncomments them), a light-format cell marker (``# +``, ``# -``), a region
#: marker, ``# In[ ]:`` of an exported script.
_MARKER_LINE = re.compile(
    r"^(\s*)([`~%!?]|[+-]\s*(?:\{.*)?$|#?\s*(?:end)?region\b|(?:In|Out)\s*\[)", re.IGNORECASE
)


def _escape(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def comment_text(text: str) -> str:
    """``text`` for one line of a Python comment: every line break, control and invisible
    character as its escape (``\\u2028``), so the comment ends where the line does."""
    return _HIDDEN.sub(_escape, text)


def markdown_text(text: str, *, one_line: bool = False) -> str:
    """``text`` for a markdown cell: every line break as ``\\n`` (or a space, ``one_line``),
    other controls as their escapes, ``<`` as ``&lt;`` (no HTML or ``<!-- #region -->`` of
    the model's), links and images as the live view keeps them (:func:`_inert_links`), and
    the first character of a line that a reader could take for a fence, a cell marker or a
    magic as a character reference (``&#96;``), which markdown shows as the character
    itself."""
    text = _HIDDEN.sub(_escape_in_markdown, _BREAK.sub("\n", text)).replace("<", "&lt;")
    text = _inert_links(text)
    lines = [_MARKER_LINE.sub(_reference, line, count=1) for line in text.split("\n")]
    return " ".join(lines) if one_line else "\n".join(lines)


#: Inline code (a run of backticks to the same run), where markdown makes no link.
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`).*?(?<!`)\1(?!`)", re.DOTALL)
#: An image's ``![``; a link's ``](`` and the start of its destination; a reference
#: definition (``[id]: url``) at a line's start.
_LINK_SYNTAX = re.compile(r"!\[|\]\(\s*([^\s)]*)|^( {0,3})\[(?=[^\]\n]*\]:)", re.MULTILINE)
#: Where a link the model writes may go: nowhere a click runs script or reads the server.
_LINK_SCHEMES = ("http://", "https://", "mailto:")


def _inert_links(text: str) -> str:
    """Markdown the model wrote, with what a reader would load or run taken out, as the live
    view does: an image becomes a link (``!\\[``: never loaded, so showing the export sends
    nothing anywhere), a link whose destination is not http, https or mailto (a
    ``javascript:`` URL, a path into the Jupyter server) shows as text, and so does a
    reference definition (which could give a link any destination). Inline code is left as
    written (markdown makes no link there)."""
    out, start = [], 0
    for span in _CODE_SPAN.finditer(text):
        out += [_LINK_SYNTAX.sub(_inert_link, text[start : span.start()]), span.group()]
        start = span.end()
    out.append(_LINK_SYNTAX.sub(_inert_link, text[start:]))
    return "".join(out)


def _inert_link(match: re.Match[str]) -> str:
    found = match.group()
    if found == "![":
        return "!\\["
    if found.startswith("]"):
        # as a browser reads a URL: references decoded, controls and spaces dropped
        bare = "".join(ch for ch in html.unescape(match.group(1)) if ord(ch) > 0x20).lower()
        return found if bare.startswith(_LINK_SCHEMES) else "]\\(" + found[2:]
    return f"{match.group(2)}\\["


def markdown_code(text: str) -> str:
    """``text`` as inline code in markdown: on one line (line breaks and controls as their
    escapes), a backtick as ``'`` (inline code shows ``<`` and ``&`` as they are)."""
    return "`" + comment_text(text).replace("`", "'") + "`"


def _escape_in_markdown(match: re.Match[str]) -> str:
    return match.group() if match.group() in "\n\t" else _escape(match)


def _reference(match: re.Match[str]) -> str:
    indent, marker = match.group(1), match.group(2)
    return f"{indent}&#{ord(marker[0])};{marker[1:]}"
