"""``%loom help``: every ``%loom`` form, the ``%%loom`` options and the settings."""

from __future__ import annotations

from traitlets.config import Configurable

from loom_nb.notebook import _help


def run(magics: type[Configurable]) -> None:
    """Print the help, with the settings of ``magics`` (the ``LoomMagics`` class)."""
    print(_help.line_help(magics))
