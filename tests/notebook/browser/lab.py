"""A JupyterLab (or Notebook 7) server for one test session: isolated dirs, a token,
readiness, teardown."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The repository root, so the kernel imports this checkout's loom_nb.
REPO_ROOT = Path(__file__).resolve().parents[3]

#: JupyterLab asks the internet for news and updates; turned off for tests.
_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}


def jupyter_lab_available() -> str | None:
    """None when JupyterLab can be started from this Python, else why not."""
    try:
        import ipywidgets  # noqa: F401
        import jupyterlab  # noqa: F401
    except ImportError as exc:
        return f"JupyterLab or ipywidgets is not installed: {exc}"
    return None


def jupyter_notebook_available() -> str | None:
    """None when Notebook 7 can be started from this Python, else why not."""
    missing = jupyter_lab_available()
    if missing is not None:
        return missing
    try:
        import notebook
    except ImportError as exc:
        return f"Notebook 7 is not installed (pip install 'notebook>=7.2'): {exc}"
    major = str(getattr(notebook, "__version__", "0")).split(".")[0]
    if not major.isdigit() or int(major) < 7:
        return f"Notebook 7 is needed, found notebook {notebook.__version__}"
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LabServer:
    """A running ``jupyter lab`` (``app="lab"``) or ``jupyter notebook`` (``app="notebook"``,
    Notebook 7) process serving ``root``."""

    root: Path
    home: Path
    port: int
    token: str
    process: subprocess.Popen[bytes]
    log_path: Path
    _log_file: Any = field(repr=False, default=None)
    app: str = "lab"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def notebook_url(self, name: str, workspace: str) -> str:
        """Where a person opens notebook ``name``: JupyterLab at a fresh workspace (old tabs
        would come back and start kernels), Notebook 7 at ``/notebooks/<name>`` (one document
        per browser tab, no workspace to restore)."""
        if self.app == "notebook":
            return f"{self.url}/notebooks/{name}?token={self.token}"
        return f"{self.url}/lab/workspaces/{workspace}/tree/{name}?reset&token={self.token}"

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    # ---- REST ---------------------------------------------------------------------------

    def api(self, method: str, path: str, body: Any = None, timeout: float = 30) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.url}{path}",
            data=data,
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            text = response.read()
        return json.loads(text) if text else None

    def kernels(self) -> list[dict[str, Any]]:
        return list(self.api("GET", "/api/kernels"))

    def sessions(self) -> list[dict[str, Any]]:
        return list(self.api("GET", "/api/sessions"))

    def shutdown_kernels(self) -> None:
        """Delete every session and kernel, so the next test starts clean."""
        for s in self.sessions():
            with contextlib.suppress(urllib.error.HTTPError):
                self.api("DELETE", f"/api/sessions/{s['id']}")
        for k in self.kernels():
            with contextlib.suppress(urllib.error.HTTPError):
                self.api("DELETE", f"/api/kernels/{k['id']}")

    def wait_ready(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"jupyter {self.app} exited with {self.process.returncode} before it was "
                    "ready:\n"
                    f"{self.log()[-4000:]}"
                )
            try:
                self.api("GET", "/api/status", timeout=5)
                return
            except (OSError, urllib.error.URLError) as exc:
                last = exc
                time.sleep(0.25)
        raise TimeoutError(
            f"jupyter {self.app} did not answer /api/status within {timeout}s ({last}):\n"
            f"{self.log()[-4000:]}"
        )

    def stop(self) -> None:
        try:
            if self.process.poll() is None:
                with contextlib.suppress(Exception):
                    self.shutdown_kernels()
                self.process.send_signal(signal.SIGTERM)
                try:
                    self.process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait(timeout=10)
        finally:
            if self._log_file is not None:
                self._log_file.close()


def start_lab(
    base: Path, *, extra_env: dict[str, str] | None = None, app: str = "lab"
) -> LabServer:
    """Start JupyterLab serving ``base / "root"``, every Jupyter dir under ``base``.

    ``app="notebook"`` starts Notebook 7 (``jupyter notebook``) instead, with the same
    isolation, token and settings (it reads JupyterLab's settings dir), and its
    ``window.jupyterapp`` exposed as well."""
    if app not in ("lab", "notebook"):
        raise ValueError(f"app is 'lab' or 'notebook', not {app!r}")
    root = base / "root"
    home = base / "home"
    root.mkdir(parents=True, exist_ok=True)
    dirs = {
        "JUPYTER_CONFIG_DIR": home / "config",
        "JUPYTER_DATA_DIR": home / "data",
        "JUPYTER_RUNTIME_DIR": home / "runtime",
        "JUPYTERLAB_SETTINGS_DIR": home / "lab-settings",
        "JUPYTERLAB_WORKSPACES_DIR": home / "lab-workspaces",
        "IPYTHONDIR": home / "ipython",
    }
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    for name, value in _SETTINGS.items():
        target = dirs["JUPYTERLAB_SETTINGS_DIR"] / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(value))

    env = dict(os.environ)
    env.update({k: str(v) for k, v in dirs.items()})
    env["HOME"] = str(home)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env.pop("JUPYTER_PATH", None)
    env.update(extra_env or {})

    token = secrets.token_hex(16)
    port = _free_port()
    log_path = base / ("jupyterlab.log" if app == "lab" else "notebook.log")
    log_file = open(log_path, "wb")  # noqa: SIM115 - closed by LabServer.stop
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab" if app == "lab" else "notebook",
        "--no-browser",
        "--allow-root",
        "--ip=127.0.0.1",
        f"--port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--ServerApp.terminals_enabled=False",
    ]
    if app == "lab":
        cmd += [
            "--LabApp.expose_app_in_browser=True",
            "--LabApp.extension_manager=readonly",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ]
    else:
        cmd += ["--JupyterNotebookApp.expose_app_in_browser=True"]
    process = subprocess.Popen(
        cmd,
        cwd=root,
        env=env,
        stdout=log_file,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    server = LabServer(root, home, port, token, process, log_path, log_file, app)
    try:
        server.wait_ready()
    except BaseException:
        server.stop()
        raise
    return server


def chromium_path() -> str | None:
    """Debian's chromium (Playwright's own download has no network on CI machines)."""
    for candidate in ("chromium", "chromium-browser"):
        found = shutil.which(candidate)
        if found:
            return found
    return None
