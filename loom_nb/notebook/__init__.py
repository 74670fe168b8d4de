"""The notebook layer: ``%loom`` magics, widgets and text rendering.

This is the only part of loom_nb that imports IPython, ipywidgets and pandas.
"""

from __future__ import annotations

from typing import Any

from loom_nb._errors import UserError
from loom_nb.notebook.session import Binding, RunFailed, Session

__all__ = ["Binding", "RunFailed", "Session", "load_ipython_extension", "session"]

_sessions: dict[int, Session] = {}


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext loom_nb``: registers ``%loom`` / ``%%loom`` (idempotent)."""
    from loom_nb.notebook.magics import LoomMagics

    _load_again_quietly(ipython)
    if id(ipython) in _sessions:
        return
    magics = LoomMagics(ipython)
    ipython.register_magics(magics)
    _sessions[id(ipython)] = magics.session
    if not ipython.custom_exceptions:  # another extension's handler is left in place
        ipython.set_custom_exc((UserError,), _show_user_error)


def _load_again_quietly(ipython: Any) -> None:
    """Run All twice loads the extension twice: loading is idempotent, so once the cell has run
    IPython forgets it was loaded, and a second ``%load_ext loom_nb`` calls this again instead
    of printing "already loaded"."""
    manager = getattr(ipython, "extension_manager", None)
    if manager is None or not hasattr(ipython, "events"):
        return

    def forget(*_: Any) -> None:
        ipython.events.unregister("post_run_cell", forget)
        manager.loaded.difference_update({"loom_nb", "loom_nb.notebook"})

    ipython.events.register("post_run_cell", forget)


def _show_user_error(
    shell: Any, etype: type[BaseException], value: BaseException, tb: Any, tb_offset: Any = None
) -> list[str]:
    """A setup mistake (:class:`~loom_nb.UserError`) as one line that says the fix, like
    IPython's UsageError; ``%xmode Verbose`` shows the whole traceback."""
    if shell.InteractiveTB.mode == "Verbose":
        stb: list[str] = shell.InteractiveTB.structured_traceback(
            etype, value, tb, tb_offset=tb_offset
        )
    else:
        stb = [f"{etype.__name__}: {value}"]
    shell._showtraceback(etype, value, stb)
    return stb


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
