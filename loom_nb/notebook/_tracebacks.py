"""Where the user's own code failed, formatted as IPython formats a cell's error, so that
``%xmode`` (Minimal, Plain, Context, Verbose) applies to the errors a run shows too."""

from __future__ import annotations

import re
import traceback
from typing import Any

from loom_nb._user_errors import kept, origin, users_traceback

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def traceback_lines(exc: BaseException, shell: Any = None, *, color: bool = False) -> list[str]:
    """``exc`` from its first frame in the user's code, in the shell's ``%xmode``; plain text
    unless ``color`` (an error output, which the frontend colours)."""
    exc = origin(exc)
    tb = users_traceback(exc)
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    formatter = getattr(shell, "InteractiveTB", None)
    if formatter is None:  # no IPython: Python's own form
        return traceback.format_exception(type(exc), exc, tb)
    lines: list[str] = formatter.structured_traceback(type(exc), exc, tb)
    return lines if color else [_ANSI.sub("", line) for line in lines]


def traceback_text(key: str, shell: Any = None) -> str | None:
    """The traceback kept for call ``key`` (a tool's or a preview's), as text; None when this
    kernel did not see it fail."""
    exc = kept(key)
    if exc is None:
        return None
    return "\n".join(line.rstrip("\n") for line in traceback_lines(exc, shell))
