"""The one copy of the magics' help: every ``%loom`` form, the ``%%loom`` options, the settings.

The parsers are built from these tables, and ``%loom help``, the magics' docstrings and the
README's "Magics" section are rendered from them (a test fails when the README drifts).
Descriptions are written once, with `code` in backticks for the README; the plain-text forms
drop the backticks.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal, TypeVar

from traitlets.config import Configurable

_F = TypeVar("_F", bound=Callable[..., object])
_WIDTH = 100  # characters per line of the plain-text help


@dataclass(frozen=True)
class Option:
    """One argument of the ``%%loom`` line."""

    #: The flags (``("-o", "--out")``), or the positional's name (``("agent",)``).
    flags: tuple[str, ...]
    summary: str
    #: The value's name as shown (``NAME``); None for a switch or the positional.
    metavar: str | None = None

    @property
    def usage(self) -> str:
        """The flags as typed: ``-o, --out NAME``."""
        if not self.flags[0].startswith("-"):
            return self.flags[0].upper()
        return ", ".join(self.flags) + (f" {self.metavar}" if self.metavar else "")


@dataclass(frozen=True)
class Subcommand:
    """One form of ``%loom``: its word, its argument (if any) and what it does."""

    #: The word after ``%loom``; "" for ``%loom AGENT``, the chat widget.
    name: str
    summary: str
    #: The argument's name as shown (``ID``), None when the form takes none.
    metavar: str | None = None
    #: argparse's ``nargs``: None for exactly one, "?" for an optional one, "+" for a list,
    #: "*" for a list that may be empty, 2 for two (their names in ``metavar``, one string).
    nargs: Literal["?", "+", "*", 2] | None = None
    #: Options with a value, each optional (``--to PATH``).
    options: tuple[Option, ...] = ()

    @property
    def usage(self) -> str:
        """``%loom NAME ARG`` as typed, e.g. ``%loom threads [AGENT]``."""
        words = ["%loom", self.name] if self.name else ["%loom"]
        if (m := self.metavar) is not None:
            shown = {None: m, 2: m, "?": f"[{m}]", "*": f"[{m}]", "+": f"{m} [{m} ...]"}
            words.append(shown[self.nargs])
        words += [f"[{o.usage}]" for o in self.options]
        return " ".join(words)


CHAT = Subcommand(
    "",
    "chat widget on AGENT's current thread: the thread, then an input box (Enter or Send "
    "sends, Shift+Enter adds a line)",
    "AGENT",
    "?",
)

#: The subcommands of ``%loom``, in the order the help lists them.
SUBCOMMANDS = (
    Subcommand(
        "threads",
        "saved threads as a DataFrame: id, title, agent, updated, messages, pending, current",
        "AGENT",
        "?",
    ),
    Subcommand("resume", "make thread ID current for its agent and show it whole", "ID"),
    Subcommand("new", "the next `%%loom AGENT` starts a new thread", "AGENT", "?"),
    Subcommand(
        "show",
        "show a thread whole (default: the current one), pending cards included; ID may be an "
        "agent's name: its current thread, else its latest",
        "ID",
        "?",
    ),
    Subcommand("delete", "delete a saved thread", "ID"),
    Subcommand(
        "export",
        "write a thread (default: the current one) as a notebook that redoes it without the "
        "agent: the conversation, each tool call as the pandas or supabase-py code that "
        "reproduces its DataFrame, writes as comments; next to this notebook under the "
        "thread's title, or `--to` a `.ipynb`, a jupytext `.py` script or a `.md` file",
        "ID",
        "?",
        (Option(("--to",), "where to write the notebook", "PATH"),),
    ),
    Subcommand("approvals", "every call waiting for approval, with Approve / Reject buttons"),
    Subcommand("approve", "approve and resume in this cell (terminal, scripts)", "CALL_ID", "+"),
    Subcommand("reject", "reject and resume in this cell", "CALL_ID", "+"),
    Subcommand(
        "resolve",
        "a call whose outcome is unknown (its kernel stopped while it ran): CHOICE is "
        "`happened` (go on), `retry` (run it again) or `failed` (tell the agent it failed)",
        "CALL_ID CHOICE",
        2,
    ),
    Subcommand(
        "answer",
        "answer the agent's question (its `ask_user` card) and resume in this cell; quote an "
        "answer of several words",
        "CALL_ID TEXT",
        2,
    ),
    Subcommand(
        "rules",
        "the rules that approve or reject calls by themselves (`agent.allow(...)`, "
        "`agent.deny(...)`, a card's Allow writes like this) as a DataFrame",
        "AGENT",
        "?",
    ),
    Subcommand(
        "revoke", "end a rule in every kernel: the next call it would decide waits", "RULE_ID"
    ),
    Subcommand(
        "eval",
        "replay eval suite SUITE (default `default`) of the agent with `--model` (a variable "
        "holding a model, or a name such as `openai:gpt-4.1-mini`) and `--instructions` (a "
        "variable holding the text), writes off, and show "
        "which threads and calls now get other frames; `%loom eval add ID ...` marks saved "
        "threads as the suite (`--suite` names it), kept in the store",
        "SUITE or add ID ...",
        "*",
        (
            Option(("--model",), "the model to replay with (default: the agent's)", "MODEL"),
            Option(("--instructions",), "a variable holding the instructions to use", "NAME"),
            Option(("--agent",), "the agent (default: the only one, or the thread's)", "AGENT"),
            Option(("--suite",), "with `add`: the suite to mark the threads in", "NAME"),
        ),
    ),
    Subcommand("help", "this list, the `%%loom` options and the settings"),
)


CELL_USAGE = "%%loom [AGENT] [--new | --thread ID] [-o NAME] [-O NAME] [--result NAME] [--raw]"
CELL_ABOUT = (
    "The cell continues the agent's current thread unless `--new` or `--thread ID`. "
    "`{name}` and `{name.attr}` in the cell are replaced from your variables when the name "
    "exists; other braces (code, JSON) stay as written, and `{{name}}` keeps `{name}`. An "
    "unknown name, or an expression such as `{x * 2}` (never evaluated), is sent as written "
    "with a one-line note."
)
CELL_OPTIONS = (
    Option(
        ("agent",),
        "variable name of the agent (default: `LoomMagics.default_agent`, or the only agent)",
    ),
    Option(("--new",), "start a new thread (it becomes the agent's current thread)"),
    Option(("--thread", "-t"), "continue thread ID (it becomes current)", "ID"),
    Option(("-o", "--out"), "bind the last DataFrame this run fetched (`None` if none)", "NAME"),
    Option(
        ("-O", "--out-all"), "bind every DataFrame this run fetched, oldest first (a list)", "NAME"
    ),
    Option(
        ("--result",), "bind the `RunResult` (`.output`, `.thread`, `.frames`, `.status`)", "NAME"
    ),
    Option(("--raw",), "send the cell as written, without `{name}` interpolation"),
)


def settings(magics: type[Configurable]) -> list[tuple[str, str]]:
    """(``name = default``, help) for each ``%config`` setting of ``magics``, by name."""
    traits = magics.class_traits(config=True)
    return [(f"{name} = {trait.default()!r}", trait.help) for name, trait in traits.items()]


def line_help(magics: type[Configurable]) -> str:
    """What ``%loom help`` prints."""
    forms = [(c.usage, c.summary) for c in (CHAT, *SUBCOMMANDS)]
    options = [(o.usage, o.summary) for o in CELL_OPTIONS]
    return "\n".join(
        [
            *_columns(forms),
            "",
            CELL_USAGE,
            *_columns(options, indent="  "),
            textwrap.fill(_plain(CELL_ABOUT), _WIDTH),
            "",
            f"Settings: %config {magics.__name__}.NAME = VALUE",
            *_columns(settings(magics), indent="  "),
        ]
    )


def line_doc() -> str:
    """The forms of ``%loom``, for the line magic's docstring."""
    return "\n".join(_columns([(c.usage, c.summary) for c in (CHAT, *SUBCOMMANDS)]))


def cell_doc() -> str:
    """The ``%%loom`` line and its options, for the cell magic's docstring."""
    options = _columns([(o.usage, o.summary) for o in CELL_OPTIONS], indent="  ")
    return "\n".join([textwrap.fill(_plain(CELL_ABOUT), _WIDTH), "", CELL_USAGE, "", *options])


def readme_section(magics: type[Configurable]) -> str:
    """The README's "Magics" section (between its ``magics-help`` markers), as markdown."""
    options = [(f"`{o.usage}`", o.summary) for o in CELL_OPTIONS]
    forms = [(f"`{c.usage}`", c.summary) for c in (CHAT, *SUBCOMMANDS)]
    config = [(f"`%config {magics.__name__}.{n}`", h) for n, h in settings(magics)]
    return "\n".join(
        [
            f"```\n{CELL_USAGE}\n```",
            "",
            CELL_ABOUT,
            "",
            *_table("`%%loom` option", options),
            "",
            *_table("line magic", forms),
            "",
            *_table("setting", config),
        ]
    )


def add_doc(text: str) -> Callable[[_F], _F]:
    """Append ``text`` (a paragraph) to the decorated function's docstring."""

    def decorate(func: _F) -> _F:
        func.__doc__ = f"{func.__doc__ or ''}\n\n{text}"
        return func

    return decorate


def _plain(text: str) -> str:
    return text.replace("`", "")


def _columns(rows: Iterable[tuple[str, str]], indent: str = "") -> list[str]:
    """Two columns; the right one wraps under itself, within ``_WIDTH`` characters."""
    rows = list(rows)
    left_width = len(indent) + max(len(left) for left, _ in rows) + 2
    return [
        textwrap.fill(
            _plain(right),
            max(_WIDTH, left_width + 30),
            initial_indent=f"{indent}{left}".ljust(left_width),
            subsequent_indent=" " * left_width,
        )
        for left, right in rows
    ]


def _table(title: str, rows: Iterable[tuple[str, str]]) -> list[str]:
    return [f"| {title} | |", "|---|---|", *(f"| {left} | {right} |" for left, right in rows)]
