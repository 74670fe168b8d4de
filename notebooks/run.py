"""Run a walkthrough notebook in a real kernel, headless, and print what a person would see.

    python notebooks/run.py                        # 01-quickstart.ipynb (what `make demo` runs)
    python notebooks/run.py notebooks/03-your-own-connector.ipynb --out build/demo

The notebook runs top to bottom in a fresh ipykernel (nbclient), in the folder ``--out``
(default ``build/demo``), so its SQLite store is ``build/demo/.loom/loom.db``. At a cell
tagged ``restart-kernel`` the kernel is restarted, as you would with Kernel > Restart.
The executed notebook, with its outputs and widget state, is saved in ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient
from nbformat.sign import NotebookNotary

HERE = Path(__file__).resolve().parent
RESTART = "restart-kernel"
WIDGET = "application/vnd.jupyter.widget-view+json"


def execute(
    notebook: Path | Any,
    workdir: Path,
    *,
    timeout: int = 120,
    kernel_name: str = "python3",
    env: dict[str, str] | None = None,
    then: Callable[[], list[str]] | None = None,
    shown: list[Any] | None = None,
) -> Any:
    """Run All in a new kernel, restarting where a cell is tagged; returns the executed notebook.

    ``notebook`` is a path or a notebook node (changed in place). ``env`` is the kernel's
    environment (default: this process's). Raises ``nbclient.exceptions.CellExecutionError``
    at the first cell that fails. ``then()`` gives cells to run after the notebook in the same
    kernel (not saved in it); each, executed, is appended to ``shown``.
    """
    nb = nbformat.read(notebook, as_version=4) if isinstance(notebook, (str, Path)) else notebook
    workdir.mkdir(parents=True, exist_ok=True)
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name=kernel_name,
        resources={"metadata": {"path": str(workdir)}},
        # the kernel's own log: errors only (ipykernel 7 warns about
        # plain-TCP sockets on every start)
        extra_arguments=["--IPKernelApp.log_level=ERROR"],
    )

    async def run_all() -> None:
        async with client.async_setup_kernel(env=env if env is not None else dict(os.environ)):
            assert client.kc is not None and client.km is not None
            for index, cell in enumerate(nb.cells):
                if RESTART in cell.metadata.get("tags", []):
                    await client.km.restart_kernel()
                    await client.kc.wait_for_ready(timeout=timeout)
                await client.async_execute_cell(
                    cell, index, execution_count=client.code_cells_executed + 1
                )
            client.set_widgets_metadata()
            for source in then() if then is not None else []:
                extra = nbformat.v4.new_code_cell(source)
                nb.cells.append(extra)  # nbclient keeps what it runs in the notebook
                await client.async_execute_cell(extra, len(nb.cells) - 1)
                nb.cells.pop()
                if shown is not None:
                    shown.append(extra)

    asyncio.run(run_all())
    return nb


def transcript(nb: Any) -> str:
    """The cells and their plain-text outputs; widgets (the thread views) as a marker."""
    out: list[str] = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            if RESTART in cell.metadata.get("tags", []):
                out.append("\n======== kernel restarted ========\n")
            continue
        lines = cell.source.splitlines()
        if len(lines) > 8:  # setup code: its first lines are enough here
            lines = [*lines[:3], f"... ({len(lines) - 3} more lines)"]
        out.append(f"In [{cell.get('execution_count') or ' '}]: " + "\n        ".join(lines))
        stream = ""  # a run's streamed text arrives in many pieces
        for o in cell.get("outputs", []):
            if o.output_type == "stream":
                stream += o.text
                continue
            if stream:
                out.append(stream.rstrip("\n"))
                stream = ""
            if o.output_type == "error":
                out.append(f"{o.ename}: {o.evalue}")
            elif WIDGET in o.get("data", {}):
                out.append("[the thread, as widgets: printed as text at the end]")
            elif 'class="loom-static' in o.get("data", {}).get("text/html", ""):
                continue  # the static copy beside the widget (for saved copies): the same thread
            elif "text/plain" in o.get("data", {}):
                out.append(o.data["text/plain"])
        if stream:
            out.append(stream.rstrip("\n"))
        out.append("")
    return "\n".join(out)


def thread_ids(db: Path) -> list[str]:
    """The threads saved in ``db``, oldest first."""
    from loom_nb.sqlite import sqlite_store

    if not db.exists():
        return []
    store = sqlite_store(db)
    try:
        return [info.id for info in reversed(store.list(limit=1000))]
    finally:
        store.close()


def show_in_kernel(db: Path) -> list[str]:
    """Cells that print each thread of ``db`` as text in the kernel that ran the notebook, where
    its agent (with its tools) says each call in words and as code."""
    ids = thread_ids(db)
    return ["%config LoomMagics.display = 'text'"] + [f"%loom show {i}" for i in ids] if ids else []


def threads_text(db: Path) -> str:
    """Every thread saved in ``db``, oldest first, as terminal IPython would print it."""
    import io

    from loom_nb.notebook.text import TextView
    from loom_nb.sqlite import sqlite_store

    store = sqlite_store(db)
    try:
        buffer = io.StringIO()
        for info in reversed(store.list(limit=1000)):
            buffer.write(f"\n── thread {info.id} · {info.agent} · {info.title!r} ──\n")
            TextView(rows=10, out=buffer).render(store.load(info.id))
        return buffer.getvalue()
    finally:
        store.close()


def _text(cell: Any) -> str:
    """What a cell printed; empty if it failed."""
    outputs = cell.get("outputs", [])
    if any(o.output_type == "error" for o in outputs):
        return ""
    return "".join(o.text for o in outputs if o.output_type == "stream" and o.name == "stdout")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebook", nargs="?", default=str(HERE / "01-quickstart.ipynb"))
    parser.add_argument("--out", default="build/demo", help="working folder (default build/demo)")
    parser.add_argument("--quiet", action="store_true", help="print only the summary")
    args = parser.parse_args(argv)
    source, workdir = Path(args.notebook), Path(args.out)
    shutil.rmtree(workdir / ".loom", ignore_errors=True)  # a fresh thread store each run
    print(f"Running {source} in a fresh kernel...", flush=True)
    started = time.monotonic()
    db = workdir / ".loom" / "loom.db"
    shown: list[Any] = []
    try:
        nb = execute(source, workdir, then=lambda: show_in_kernel(db), shown=shown)
    except Exception as exc:
        print(f"\nThe notebook failed: {exc}", file=sys.stderr)
        return 1
    elapsed = time.monotonic() - started
    saved = workdir / source.name
    # A record, not a walkthrough: saving it in JupyterLab writes no jupytext .py beside it.
    nb.metadata.get("jupytext", {}).pop("formats", None)
    nbformat.write(nb, saved)
    # Trusted for you (like `jupyter trust`): JupyterLab shows the stored widgets (the thread
    # views) only for trusted notebooks, and plain text otherwise.
    NotebookNotary().sign(nb)
    if not args.quiet:
        print("\n" + transcript(nb))
        said = [_text(c) for c in shown[1:]]
        if said and all(said):
            print(f"The threads, as saved in {db}:\n")
            print("\n".join(said))
        elif db.exists():  # an agent the notebook no longer defines: without its tools
            print(f"The threads, as saved in {db}:\n{threads_text(db)}")
    print(f"\nDone in {elapsed:.1f} s. The executed notebook is {saved}.")
    print(f"Open it in JupyterLab:  make lab NB={saved}   (a record: its buttons are not live)")
    print(f"Or run the walkthroughs yourself:  make lab   (then {HERE.name}/01-quickstart.ipynb)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
