"""``%loom export [ID] [--to PATH]``: the thread as a notebook that redoes it without the agent
(see ``Agent.export``)."""

from __future__ import annotations

import re
from pathlib import Path

from loom_nb._messages import Thread
from loom_nb.notebook.commands.show import thread_or_current
from loom_nb.notebook.session import Session, usage_errors


def run(session: Session, thread_id: str | None, to: str | None) -> Path:
    """Export ``thread_id`` (default: the current thread) to ``to``, or next to the current
    notebook under the thread's title; prints where it went, and why when a file kept its
    name."""
    agent, thread = thread_or_current(session, thread_id, "export")
    path = Path(to).expanduser() if to else default_path(session, thread)
    with usage_errors():
        written = agent.export(thread.id, path, context=session.context())
    print(f"Exported thread {thread.id} to {written}")
    if written != path:
        print(
            f"{path} was left as it is: it is not this thread's export as loom_nb wrote it "
            "(someone changed it since, or it is another file)"
        )
    return written


def default_path(session: Session, thread: Thread) -> Path:
    """``<title>.ipynb`` next to the current notebook (the kernel's folder when it is not
    known); the export goes to ``<title>-2.ipynb`` and so on when that file is not this
    thread's export as loom_nb wrote it."""
    stem = re.sub(r"[^A-Za-z0-9]+", "-", thread.title or "").strip("-").lower()[:60]
    return notebook_folder(session) / f"{stem or 'thread-' + thread.id[:8]}.ipynb"


def notebook_folder(session: Session) -> Path:
    """The current notebook's folder: Jupyter tells the kernel its session's path
    (``__session__``), VS Code its file; otherwise the kernel's working folder, which is the
    notebook's in Jupyter."""
    for name in ("__vsc_ipynb_file__", "__session__"):
        value = session.namespace.get(name)
        if isinstance(value, str) and value:
            path = Path(value)
            if path.is_absolute() and path.parent.is_dir():
                return path.parent
    return Path.cwd()
