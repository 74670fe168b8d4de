"""``%%loom`` and ``%loom``: parse the line, then delegate to the session (jupysql style).

Settings are traitlets, changed with ``%config LoomMagics.<name> = value`` (or in an IPython
profile as ``c.LoomMagics.<name>``).
"""

from __future__ import annotations

import keyword
import shlex
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import MagicArgumentParser
from traitlets import Bool, Enum, Float, Int, TraitError, Unicode, validate

from loom_nb.notebook import commands
from loom_nb.notebook.interpolate import interpolate
from loom_nb.notebook.session import Binding, Session

SUBCOMMANDS = (
    "threads",
    "resume",
    "new",
    "show",
    "delete",
    "approvals",
    "approve",
    "reject",
    "resolve",
    "help",
)

LINE_HELP = """%loom AGENT            chat widget on AGENT's current thread
%loom threads [AGENT]  saved threads as a table (id, title, agent, updated, messages, pending)
%loom resume ID        make thread ID current for its agent and show it whole
%loom new [AGENT]      the next %%loom AGENT starts a new thread
%loom show [ID]        show a thread whole (default: the current one), with pending cards
%loom delete ID        delete a saved thread
%loom approvals        calls waiting for approval, with Approve / Reject buttons
%loom approve CALL_ID [CALL_ID ...]   approve and resume (terminal, scripts)
%loom reject CALL_ID [CALL_ID ...]    reject and resume
%loom resolve CALL_ID happened|retry|failed   a call whose outcome is unknown (its kernel
                       stopped while it ran): it happened / run it again / tell the agent it failed
%%loom [AGENT] [--new | --thread ID] [-o NAME] [-O NAME] [--result NAME] [--raw]
Settings: %config LoomMagics  (default_agent, rows, stream_interval, display, interpolate,
          context)"""


def _identifier(name: str | None, option: str) -> str | None:
    if name is not None and (not name.isidentifier() or keyword.iskeyword(name)):
        raise UsageError(f"{option} {name!r}: give a Python variable name, e.g. {option} df")
    return name


@magics_class
class LoomMagics(Magics):
    """Talk to loom_nb agents from cells."""

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
    def loom_cell(self, line: str, cell: str) -> None:
        """Send the cell to an agent and show the thread as it streams.

        Continues the agent's current thread unless --new or --thread ID. ``{name}`` and
        ``{name.attr}`` are replaced from the namespace when the name exists; other braces
        (code, JSON) stay as written, and ``{{name}}`` keeps ``{name}``.

        %%loom [AGENT] [--new | --thread ID] [-o NAME] [-O NAME] [--result NAME] [--raw]

        AGENT          variable name of the agent (default: LoomMagics.default_agent, or
                       the only agent defined)
        --new          start a new thread (it becomes the agent's current thread)
        --thread, -t   continue thread ID (it becomes current)
        -o NAME        bind the last DataFrame this run fetched to NAME (None if none)
        -O NAME        bind every DataFrame this run fetched, oldest first (a list)
        --result NAME  bind the RunResult (.output, .thread, .frames, .status)
        --raw          send the cell as written, without {name} interpolation
        """
        try:
            args = CELL_PARSER.parse_args(shlex.split(line))
        except ValueError as exc:
            raise UsageError(f"%%loom: {exc}") from None
        if args.new and args.thread:
            raise UsageError("use either --new or --thread ID, not both")
        binding = Binding(
            _identifier(args.out, "-o"),
            _identifier(args.out_all, "-O"),
            _identifier(args.result, "--result"),
        )
        ns = self.session.namespace
        prompt = cell if args.raw or not self.interpolate else interpolate(cell, ns)
        if not prompt.strip():
            raise UsageError("the cell is empty: write the message for the agent below %%loom")
        agent = self.session.agent(args.agent)
        self.session.run_cell(
            agent, prompt.strip("\n"), new=args.new, thread_id=args.thread, binding=binding
        )

    @line_magic("loom")  # type: ignore[arg-type]
    def loom_line(self, line: str) -> Any:
        """%loom AGENT opens the chat widget; the subcommands:

        %loom AGENT            chat widget on AGENT's current thread
        %loom threads [AGENT]  saved threads as a table
        %loom resume ID        make thread ID current for its agent and show it whole
        %loom new [AGENT]      the next %%loom AGENT starts a new thread
        %loom show [ID]        show a thread whole (default: the current one)
        %loom delete ID        delete a saved thread
        %loom approvals        calls waiting for approval, with Approve / Reject buttons
        %loom approve CALL_ID [CALL_ID ...]   approve and resume here
        %loom reject CALL_ID [CALL_ID ...]    reject and resume here
        %loom resolve CALL_ID happened|retry|failed   a call whose outcome is unknown
        """
        try:
            words = shlex.split(line)
        except ValueError as exc:
            raise UsageError(f"%loom: {exc}") from None
        if not words:
            commands.chat(self.session, None)
            return None
        command, rest = words[0], words[1:]
        if command not in SUBCOMMANDS:
            if rest:
                raise UsageError(
                    f"unknown %loom command {command!r}; commands: {', '.join(SUBCOMMANDS)}"
                )
            commands.chat(self.session, command)
            return None
        if command == "help":
            print(LINE_HELP)
            return None
        if command in ("threads", "new"):
            agent = _parse(command, rest, ("agent", "?"))
            if command == "threads":
                return self.session.threads_frame(agent)
            commands.new(self.session, agent)
        elif command in ("resume", "delete"):
            thread_id = _parse(command, rest, ("id", None))
            assert thread_id is not None
            if command == "resume":
                commands.resume(self.session, thread_id)
            else:
                commands.delete(self.session, thread_id)
        elif command == "show":
            commands.show(self.session, _parse(command, rest, ("id", "?")))
        elif command == "approvals":
            _parse(command, rest, None)
            commands.approvals(self.session)
        elif command == "resolve":
            parser = _parser(command)
            parser.add_argument("call_id", metavar="CALL_ID")
            parser.add_argument("choice", choices=["happened", "retry", "failed"])
            args = parser.parse_args(["--", *rest])
            self.session.decide([args.call_id], args.choice)
        else:
            parser = _parser(command)
            parser.add_argument("call_ids", nargs="+", metavar="CALL_ID")
            ids: list[str] = parser.parse_args(rest).call_ids
            self.session.decide(list(dict.fromkeys(ids)), command == "approve")
        return None


def _parser(command: str, prog: str = "%loom ") -> Any:
    return MagicArgumentParser(prog=prog + command, add_help=False)  # type: ignore[no-untyped-call]


CELL_PARSER = _parser("%%loom", prog="")
CELL_PARSER.add_argument("agent", nargs="?", help="variable name of the agent")
CELL_PARSER.add_argument("--new", action="store_true", help="start a new thread")
CELL_PARSER.add_argument("--thread", "-t", metavar="ID", help="continue thread ID")
CELL_PARSER.add_argument("-o", "--out", metavar="NAME", help="bind the last DataFrame fetched")
CELL_PARSER.add_argument("-O", "--out-all", metavar="NAME", help="bind all DataFrames (a list)")
CELL_PARSER.add_argument("--result", metavar="NAME", help="bind the RunResult")
CELL_PARSER.add_argument("--raw", action="store_true", help="no {name} interpolation")


def _parse(command: str, rest: list[str], positional: tuple[str, str | None] | None) -> Any:
    parser = _parser(command)
    if positional is not None:
        name, nargs = positional
        parser.add_argument(name, nargs=nargs, metavar=name.upper())
    # "--": these commands take no options, so an id like "-AbC" (older stores) is an id
    ns = parser.parse_args(["--", *rest] if positional is not None else rest)
    return getattr(ns, positional[0]) if positional is not None else None
