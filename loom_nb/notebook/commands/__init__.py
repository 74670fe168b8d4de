"""What each ``%loom`` subcommand does, one module each; ``magics.py`` parses and calls them.

Every module has one ``run(...)`` taking the parsed arguments: ``cell`` is the ``%%loom``
cell, ``chat`` is ``%loom AGENT``, ``decide`` is both ``approve`` and ``reject`` (and carries
``resolve``'s choice and ``answer``'s text), ``evals`` is ``eval``. What they
show and say is listed once, in ``loom_nb.notebook._help``.
"""

from loom_nb.notebook.commands import (
    answer,
    approvals,
    cell,
    chat,
    decide,
    delete,
    evals,
    export,
    help,
    new,
    resolve,
    resume,
    revoke,
    rules,
    show,
    threads,
)

__all__ = [
    "answer",
    "approvals",
    "cell",
    "chat",
    "decide",
    "delete",
    "evals",
    "export",
    "help",
    "new",
    "resolve",
    "resume",
    "revoke",
    "rules",
    "show",
    "threads",
]
