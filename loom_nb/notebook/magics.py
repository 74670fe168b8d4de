"""``%%loom`` and ``%loom``: parse the line, then call the subcommand's handler (jupysql style).

The handlers are in ``loom_nb.notebook.commands``, one module each; the forms, options and
their help are tables in ``loom_nb.notebook._help``, from which the parsers here are built.
Settings are traitlets, changed with ``%config LoomMagics.<name> = value`` (or in an IPython
profile as ``c.LoomMagics.<name>``).
"""

from __future__ import annotations

import keyword
import shlex
import sys
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import MagicArgumentParser
from traitlets import Bool, Enum, Float, Int, TraitError, Unicode, validate
from traitlets.config import Configurable

from loom_nb.notebook import _help, commands
from loom_nb.notebook._help import CELL_OPTIONS, SUBCOMMANDS, Subcommand
from loom_nb.notebook.interpolate import interpolate, unreplaced
from loom_nb.notebook.session import Binding, Session

_BY_NAME = {c.name: c for c in SUBCOMMANDS}


@magics_class
class LoomMagics(Magics, Configurable):
    """Talk to loom_nb agents from cells: ``%%loom`` sends a cell, ``%loom help`` lists the
    rest."""

    default_agent = Unicode("", help="Variable name of the agent used when %%loom names none.").tag(
        config=True
    )
    rows = Int(10, help="Rows shown per DataFrame table (the whole frame stays in Python).").tag(
        config=True
    )
    stream_interval = Float(
        0.1, help="Seconds between streamed text updates sent to the frontend (batching)."
    ).tag(config=True)
    display = Enum(
        ["auto", "widgets", "text"],
        "auto",
        help="auto: widgets in a Jupyter kernel, text in terminal IPython and scripts.",
    ).tag(config=True)
    interpolate = Bool(True, help="Replace {name} in %%loom cells from the namespace.").tag(
        config=True
    )
    context = Unicode(
        "",
        help="Variable name of a dict passed to every run as context= (who the user is, for an "
        "agent's auth hook and client factories), e.g. %config LoomMagics.context = 'ctx'.",
    ).tag(config=True)

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell, **kwargs)
        self.session = Session(shell, self)

    @validate("rows")
    def _check_rows(self, proposal: Any) -> int:
        value = int(proposal["value"])
        if value < 0:
            raise TraitError("LoomMagics.rows must be 0 or more")
        return value

    @validate("stream_interval")
    def _check_interval(self, proposal: Any) -> float:
        value = float(proposal["value"])
        if not 0 <= value <= 10:
            raise TraitError("LoomMagics.stream_interval is in seconds, between 0 and 10")
        return value

    @cell_magic("loom")  # type: ignore[arg-type]
    @_help.add_doc(_help.cell_doc())
    def loom_cell(self, line: str, cell: str) -> None:
        """Send the cell to an agent and show the thread as it streams."""
        args = CELL_PARSER.parse_args(_split(line, "%%loom"))
        if args.new and args.thread:
            raise UsageError("use either --new or --thread ID, not both")
        binding = Binding(
            _identifier(args.out, "-o"),
            _identifier(args.out_all, "-O"),
            _identifier(args.result, "--result"),
        )
        if args.raw or not self.interpolate:
            prompt = cell
        else:
            prompt = interpolate(cell, self.session.namespace)
            note = unreplaced(cell, self.session.namespace)
            if note:
                print(note, file=sys.stderr)
        if not prompt.strip():
            raise UsageError("the cell is empty: write the message for the agent below %%loom")
        commands.cell.run(
            self.session,
            args.agent,
            prompt.strip("\n"),
            new=args.new,
            thread_id=args.thread,
            binding=binding,
        )

    @line_magic("loom")  # type: ignore[arg-type]
    @_help.add_doc(_help.line_doc())
    def loom_line(self, line: str) -> Any:
        """``%loom AGENT`` opens the chat widget; the subcommands manage threads and approvals."""
        words = _split(line, "%loom")
        if not words or words[0] not in _BY_NAME:
            if len(words) > 1:
                names = ", ".join(_BY_NAME)
                raise UsageError(f"unknown %loom command {words[0]!r}; commands: {names}")
            commands.chat.run(self.session, words[0] if words else None)
            return None
        command = _BY_NAME[words[0]]
        rest, options = _take_options(command, words[1:])
        name, value = words[0], _parse(command, rest)
        s = self.session
        match name:
            case "threads":
                return commands.threads.run(s, value)
            case "new":
                commands.new.run(s, value)
            case "resume":
                commands.resume.run(s, value)
            case "show":
                commands.show.run(s, value)
            case "delete":
                commands.delete.run(s, value)
            case "export":
                commands.export.run(s, value, options.get("--to"))
            case "approvals":
                commands.approvals.run(s)
            case "approve" | "reject":
                commands.decide.run(s, value, approve=name == "approve")
            case "resolve":
                commands.resolve.run(s, *value)
            case "answer":
                commands.answer.run(s, *value)
            case "rules":
                return commands.rules.run(s, value)
            case "revoke":
                commands.revoke.run(s, value)
            case "eval":
                return commands.evals.run(s, value, options)
            case "help":
                commands.help.run(type(self))
            case _:  # a form listed in _help.SUBCOMMANDS that has no handler here
                raise AssertionError(f"%loom {name} has no handler")
        return None


def _split(line: str, magic: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"{magic}: {exc}") from None


def _parser(prog: str) -> Any:
    return MagicArgumentParser(prog=prog, add_help=False)  # type: ignore[no-untyped-call]


def _parse(command: Subcommand, words: list[str]) -> Any:
    """The command's argument (None, a string or a list); a mistake is a UsageError."""
    parser = _parser(command.usage)
    if command.metavar is None:
        parser.parse_args(words)
        return None
    parser.add_argument("value", nargs=command.nargs, metavar=command.metavar)
    # "--": these commands take no options, so an id like "-AbC" (older stores) is an id
    return parser.parse_args(["--", *words]).value


def _take_options(command: Subcommand, words: list[str]) -> tuple[list[str], dict[str, str]]:
    """The command's options (``--to PATH`` or ``--to=PATH``) out of ``words``, and the rest."""
    flags = {flag for option in command.options for flag in option.flags}
    rest: list[str] = []
    found: dict[str, str] = {}
    items = iter(words)
    for word in items:
        flag, equals, value = word.partition("=")
        if flag in flags:
            if not equals:
                value = next(items, "")
            if not value:
                raise UsageError(f"{command.usage}: {flag} needs a value")
            found[flag] = value
        else:
            rest.append(word)
    return rest, found


def _cell_parser() -> Any:
    parser = _parser("%%loom")
    for option in CELL_OPTIONS:
        if not option.flags[0].startswith("-"):
            parser.add_argument(option.flags[0], nargs="?", help=option.summary)
        elif option.metavar is None:
            parser.add_argument(*option.flags, action="store_true", help=option.summary)
        else:
            parser.add_argument(*option.flags, metavar=option.metavar, help=option.summary)
    return parser


CELL_PARSER = _cell_parser()


def _identifier(name: str | None, option: str) -> str | None:
    if name is not None and (not name.isidentifier() or keyword.iskeyword(name)):
        raise UsageError(f"{option} {name!r}: give a Python variable name, e.g. {option} df")
    return name
