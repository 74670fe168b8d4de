"""``%loom export [ID] [--to PATH]``: the thread as a notebook that redoes it without the agent
(see ``Agent.export``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from loom_nb._messages import Thread
from loom_nb.notebook.commands.show import thread_or_current
from loom_nb.notebook.session import Session, usage_errors


def run(session: Session, thread_id: str | None, to: str | None) -> Path:
    """Export ``thread_id`` (default: the current thread) to ``to``, or next to the current
    notebook under the thread's title; prints where it went."""
    agent, thread = thread_or_current(session, thread_id, "export")
    path = Path(to).expanduser() if to else default_path(session, thread)
    with usage_errors():
        written = agent.export(thread.id, path, context=session.context())
    print(f"Exported thread {thread.id} to {written}")
    return written


def default_path(session: Session, thread: Thread) -> Path:
    """``<title>.ipynb`` next to the current notebook (the kernel's folder when it is not
    known), never over a file that is not an earlier export of this thread."""
    folder = notebook_folder(session)
    stem = re.sub(r"[^A-Za-z0-9]+", "-", thread.title or "").strip("-").lower()[:60]
    stem = stem or f"thread-{thread.id[:8]}"
    for n in range(1, 1000):
        path = folder / (f"{stem}.ipynb" if n == 1 else f"{stem}-{n}.ipynb")
        if not path.exists() or _exported_from(path) == thread.id:
            return path
    raise AssertionError("a thousand exports of one title")  # pragma: no cover


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


def _exported_from(path: Path) -> str | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        thread_id = data["metadata"]["loom_nb"]["thread_id"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return thread_id if isinstance(thread_id, str) else None
