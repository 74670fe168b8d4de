"""What mybinder.org reads (``binder/``) installs into a fresh virtual environment, and every
walkthrough notebook then runs there, in a kernel of that environment.

Slow but required: about a minute here (venv ~4 s, ``pip install -r binder/requirements.txt``
~35 s with pip's configured local wheels and cache, notebooks ~16 s). pip uses the machine's
own configuration (index, wheel folders, cache); nothing is forced to download again.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from tests.test_notebooks import ALL, ONLINE

ROOT = Path(__file__).resolve().parents[1]
#: Not part of a fresh clone.
IGNORE = shutil.ignore_patterns(
    ".venv",
    ".loom",
    ".git",
    "__pycache__",
    "*.egg-info",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".hypothesis",
    "test-artifacts",
    ".ipynb_checkpoints",
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_binder_requirements_install_and_the_notebooks_run(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(ROOT, repo, ignore=IGNORE)
    venv = tmp_path / "venv"
    python = venv / "bin" / "python"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ONLINE and k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
    }
    env.update(
        PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        IPYTHONDIR=str(tmp_path / "ipython"),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    timings = {}

    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    timings["venv"] = time.monotonic() - started

    # What repo2docker does with binder/requirements.txt: pip, from the repository root.
    started = time.monotonic()
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "-r", "binder/requirements.txt"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    timings["pip install"] = time.monotonic() - started
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    assert not (repo / "binder" / "postBuild").exists() or os.access(
        repo / "binder" / "postBuild", os.X_OK
    )
    # jupytext's server extension: a walkthrough saved in that JupyterLab updates its .py too.
    extensions = subprocess.run(
        [str(python), "-m", "jupyter", "server", "extension", "list"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    listed = (extensions.stdout + extensions.stderr).splitlines()
    assert any("jupyterlab_jupytext" in line and "enabled" in line for line in listed), listed

    # The kernel is that environment's, and loom_nb is the clone's.
    probe = nbformat.v4.new_notebook()
    probe.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    probe.cells = [
        nbformat.v4.new_code_cell(
            "import sys, loom_nb, ipywidgets, jupyterlab\n"
            "print(sys.prefix)\nprint(loom_nb.__file__)"
        )
    ]
    nbformat.write(probe, tmp_path / "probe.ipynb")
    out = tmp_path / "out"
    started = time.monotonic()
    for name in [str(tmp_path / "probe.ipynb"), *(f"notebooks/{n}" for n in ALL)]:
        done = subprocess.run(
            [str(python), "notebooks/run.py", name, "--out", str(out), "--quiet"],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"{name}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    timings["notebooks"] = time.monotonic() - started

    probed = nbformat.read(out / "probe.ipynb", as_version=4).cells[0].outputs[0].text
    prefix, module = probed.split()
    assert Path(prefix).resolve() == venv.resolve()
    assert Path(module).resolve() == (repo / "loom_nb" / "__init__.py").resolve()
    for name in ALL:
        nb = nbformat.read(out / name, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert all(c.execution_count for c in code), name
        assert not [o for c in code for o in c.outputs if o.output_type == "error"], name
    print("binder test timings:", ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()))
