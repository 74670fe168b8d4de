"""``%loom export [ID] [--to PATH]``: the thread as a notebook that redoes it without the agent
(see ``Agent.export``)."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

from loom_nb._code import comment_text
from loom_nb._export import written_by_loom
from loom_nb._messages import Thread
from loom_nb.notebook.commands.show import thread_or_current
from loom_nb.notebook.session import Session, usage_errors


def run(session: Session, thread_id: str | None, to: str | None) -> Path:
    """Export ``thread_id`` (default: the current thread) to ``to``, or next to the current
    notebook under the thread's title; prints where it went, and why when that is not the
    path asked for (or the title's)."""
    agent, thread = thread_or_current(session, thread_id, "export")
    wanted = Path(to).expanduser() if to else title_path(session, thread)
    path = wanted if to else default_path(wanted, thread)
    with usage_errors():
        written = agent.export(thread.id, path, context=session.context())
    print(f"Exported thread {thread.id} to {written}")
    if written != wanted:
        why = (
            "someone changed it since loom_nb wrote it, or wrote it"
            if written_by_loom(wanted) is None
            else "it holds the export of another thread"
        )
        print(f"{wanted} was left as it is: {why}")
    return written


def title_path(session: Session, thread: Thread) -> Path:
    """``<title>.ipynb`` next to the current notebook (the kernel's folder when it is not
    known)."""
    stem = re.sub(r"[^A-Za-z0-9]+", "-", thread.title or "").strip("-").lower()[:60]
    return notebook_folder(session) / f"{stem or 'thread-' + thread.id[:8]}.ipynb"


def default_path(path: Path, thread: Thread) -> Path:
    """``path``, or ``path-2`` and so on, the first that holds no file or this thread's export
    as loom_nb wrote it: never another thread's export, nor a file someone wrote or changed."""
    for n in itertools.count(1):
        candidate = path if n == 1 else path.with_name(f"{path.stem}-{n}{path.suffix}")
        if not candidate.exists() or written_by_loom(candidate) == comment_text(thread.id):
            return candidate
    raise AssertionError("unreachable")  # pragma: no cover


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
