"""Kernels with ipykernel 6.31, 7.3 and 7.4 for the notebook tests, built on demand.

7.4 is the test environment's own ipykernel. For the others, ``pip install --no-deps
--target`` puts just that ipykernel into a cached folder (``.loom/test-kernels/`` in the
repository, ignored by git), and the kernelspec puts the folder first on ``PYTHONPATH``:
everything else (IPython, pyzmq, ipywidgets, loom_nb) comes from the main environment.
Seconds on a fresh clone, nothing after that.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".loom" / "test-kernels"

#: kernel version -> pip requirement (None: the environment's own ipykernel)
VERSIONS: dict[str, str | None] = {
    "6.31": "ipykernel==6.31.*",
    "7.3": "ipykernel==7.3.*",
    "7.4": None,
}


def kernel_name(version: str) -> str:
    return "loom-ipykernel-" + version.replace(".", "-")


def build(version: str) -> tuple[str, Path]:
    """Make the kernelspec for ``version``; returns (kernel name, kernelspec folder)."""
    requirement = VERSIONS[version]
    env = {"IPYTHONDIR": str(CACHE / "ipython"), "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
    if requirement is not None:
        site = CACHE / f"site-{version}"
        marker = site / ".loom-installed"
        if not marker.exists() or marker.read_text() != requirement:
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                    "--no-deps",
                    "--upgrade",
                    "--target",
                    str(site),
                    requirement,
                ],
                check=True,
                capture_output=True,
                text=True,
                timeout=300,
            )
            marker.write_text(requirement)
        # that ipykernel first, then this checkout (not whichever loom_nb is installed)
        env["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT)])
    specs = CACHE / "kernels"
    spec_dir = specs / kernel_name(version)
    spec_dir.mkdir(parents=True, exist_ok=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"Python (ipykernel {version})",
        "language": "python",
        "env": env,
        "metadata": {"debugger": False},
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec, indent=1))
    return kernel_name(version), specs


def kernel_manager(name: str, specs: Path) -> KernelManager:
    specs_manager = KernelSpecManager(kernel_dirs=[str(specs)])
    return KernelManager(kernel_name=name, kernel_spec_manager=specs_manager)


def notebook(cells: list[str], name: str) -> Any:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata["kernelspec"] = {"name": name, "display_name": name, "language": "python"}
    return nb


def execute(
    cells: list[str],
    kernel: tuple[str, Path],
    cwd: Path,
    timeout: int = 60,
    store_widget_state: bool = True,
) -> Any:
    """Run All, like a person would: stops at the first failing cell (raises).
    ``store_widget_state=False`` saves it as JupyterLab does by default (no widget state)."""
    name, specs = kernel
    nb = notebook(cells, name)
    client = NotebookClient(
        nb,
        km=kernel_manager(name, specs),
        timeout=timeout,
        store_widget_state=store_widget_state,
        resources={"metadata": {"path": str(cwd)}},
    )
    client.execute()
    return nb


def exported_results(nb: Any, setup: str, cwd: Path) -> dict[str, Any]:
    """Run an exported notebook ``nb`` in a fresh kernel (ipykernel 7.4) after a first cell
    ``setup`` that defines what the export expects; the ``result_*`` variables it leaves."""
    nb.cells.insert(0, nbformat.v4.new_code_cell(setup))
    nb.cells.append(
        nbformat.v4.new_code_cell(
            "import pickle\n"
            'with open("results.pkl", "wb") as f:\n'
            '    pickle.dump({k: v for k, v in globals().items() if k.startswith("result_")}, f)'
        )
    )
    name, specs = build("7.4")
    nb.metadata["kernelspec"] = {"name": name, "display_name": name, "language": "python"}
    NotebookClient(
        nb,
        km=kernel_manager(name, specs),
        timeout=120,
        resources={"metadata": {"path": str(cwd)}},
    ).execute()
    with open(cwd / "results.pkl", "rb") as f:
        results: dict[str, Any] = pickle.load(f)
    return results


def text_of(cell: Any) -> str:
    """Everything a cell printed or displayed as text."""
    parts = []
    for out in cell.get("outputs", []):
        if out["output_type"] == "stream":
            parts.append(out["text"])
        elif "data" in out:
            parts.append(out["data"].get("text/plain", ""))
        elif out["output_type"] == "error":
            parts.append(f"{out['ename']}: {out['evalue']}")
    return "".join(parts)


def widget_states(nb: Any) -> list[dict[str, Any]]:
    """The widget models nbclient stored in the notebook."""
    stored = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    return [m["state"] for m in stored.get("state", {}).values()]


def with_class(nb: Any, css: str) -> list[dict[str, Any]]:
    return [s for s in widget_states(nb) if css in s.get("_dom_classes", ())]


class Kernel:
    """A started kernel and a blocking client; ``run`` returns the reply and the iopub
    messages of that one request."""

    def __init__(self, kernel: tuple[str, Path], cwd: Path) -> None:
        name, specs = kernel
        self.km = kernel_manager(name, specs)
        self.km.start_kernel(cwd=str(cwd))
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)

    def send(self, code: str) -> str:
        msg_id: str = self.kc.execute(code)
        return msg_id

    def collect(self, msg_id: str, until: Any = None, timeout: float = 60) -> list[dict[str, Any]]:
        """iopub messages of ``msg_id`` until the kernel is idle (or ``until(msg)`` is true)."""
        found = []
        while True:
            msg = self.kc.get_iopub_msg(timeout=timeout)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            found.append(msg)
            if until is not None and until(msg):
                return found
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                return found

    def reply(self, msg_id: str, timeout: float = 60) -> dict[str, Any]:
        while True:
            msg = self.kc.get_shell_msg(timeout=timeout)
            if msg["parent_header"].get("msg_id") == msg_id:
                content: dict[str, Any] = msg["content"]
                return content

    def run(self, code: str, timeout: float = 60) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        msg_id = self.send(code)
        messages = self.collect(msg_id, timeout=timeout)
        return self.reply(msg_id, timeout), messages

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


def printed(messages: list[dict[str, Any]]) -> str:
    return "".join(m["content"]["text"] for m in messages if m["msg_type"] == "stream")
