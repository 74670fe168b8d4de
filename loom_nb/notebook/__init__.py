"""The notebook layer: ``%loom`` magics, widgets and text rendering.

This is the only part of loom_nb that imports IPython, ipywidgets and pandas.
"""

from __future__ import annotations

from typing import Any

from loom_nb.notebook.session import Binding, RunFailed, Session

__all__ = ["Binding", "RunFailed", "Session", "load_ipython_extension", "session"]

_sessions: dict[int, Session] = {}


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext loom_nb``: registers ``%loom`` / ``%%loom`` (idempotent)."""
    from loom_nb.notebook.magics import LoomMagics

    if id(ipython) in _sessions:
        return
    magics = LoomMagics(ipython)
    ipython.register_magics(magics)
    _sessions[id(ipython)] = magics.session


def session(shell: Any = None) -> Session:
    """The kernel's loom session: current threads, the last view (``.last_view.cards``),
    ``.wait()`` for runs started by buttons."""
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    found = _sessions.get(id(shell))
    if found is None:
        raise RuntimeError("load the extension first: %load_ext loom_nb")
    return found
