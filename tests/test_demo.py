"""``make demo`` runs ``notebooks/run.py``: the quickstart in a fresh kernel, offline, printed as
text, and saved as an executed notebook. Run here as a subprocess, as the Makefile does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.sign import NotebookNotary

from tests.test_notebooks import ONLINE

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def test_demo_script_prints_the_session_and_saves_the_notebook(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ONLINE}
    env["IPYTHONDIR"] = str(tmp_path / "ipython")
    env["JUPYTER_DATA_DIR"] = str(tmp_path / "jupyter")  # where the notebook's trust is kept
    out = tmp_path / "demo"
    done = subprocess.run(
        [sys.executable, "notebooks/run.py", "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=200,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    text = done.stdout
    # The conversation as the person saw it, in order, with the kernel restart between.
    expected = [
        "you: Which orders above 100 are still open?",
        "  → frames_select · orders · status = 'open' AND total > 100",  # words, not JSON
        "assistant: **3** orders are open and above 100: #3 Cleo (310.00), #7 Eve (180.25), "
        "#1 Ada (120.50).",
        "you: Flag them as priority.",
        "  ← frames_update [approved]:",
        "you: Please cancel order 7.",
        "assistant: Done. Updated 1 row(s) of 'orders' where id = 7.",
    ]
    lines = text.splitlines()
    positions = [next(i for i, line in enumerate(lines) if line.startswith(e)) for e in expected]
    assert positions == sorted(positions)
    assert "======== kernel restarted ========" in text
    assert f"The threads, as saved in {out / '.loom' / 'loom.db'}:\n" in text  # no nested .loom
    assert "make lab NB=" in text
    saved = out / "01-quickstart.ipynb"
    nb = nbformat.read(saved, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code)
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]
    assert "widgets" in nb.metadata  # the thread views, as JupyterLab will show them
    # Signed for this user, or JupyterLab would show the widgets as plain text.
    notary = NotebookNotary(data_dir=str(tmp_path / "jupyter"))
    assert notary.check_signature(nb)
