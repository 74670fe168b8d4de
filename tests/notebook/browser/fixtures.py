"""pytest fixtures: ``lab`` (one JupyterLab per module) and ``page`` (a fresh chromium page);
``notebook7`` (one Notebook 7 server per module); ``frontend`` (each of the two, a parameter),
its ``server`` and a ``frontend_page`` on it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import require
from tests.notebook.browser.lab import (
    LabServer,
    chromium_path,
    jupyter_lab_available,
    jupyter_notebook_available,
    start_lab,
)
from tests.notebook.browser.page import chromium_context, playwright_available, screenshot
from tests.notebook.browser.steps import LAB, NOTEBOOK7, Frontend


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    missing = jupyter_lab_available()
    require(missing is None, missing or "")
    server = start_lab(tmp_path_factory.mktemp("lab"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def notebook7(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    """A ``jupyter notebook`` (Notebook 7) server, isolated like ``lab``."""
    missing = jupyter_notebook_available()
    require(missing is None, missing or "")
    server = start_lab(tmp_path_factory.mktemp("notebook7"), app="notebook")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def chromium() -> str:
    missing = playwright_available()
    require(missing is None, missing or "")
    path = chromium_path()
    require(path is not None, "Debian's chromium is not installed (apt-get install chromium)")
    assert path is not None
    return path


@contextmanager
def _page_on(server: LabServer, chromium: str, profile: Path, name: str) -> Iterator[Any]:
    with chromium_context(chromium, profile) as context:
        page = context.new_page()
        try:
            yield page
        finally:
            try:
                screenshot(page, f"{name}-last")
            except Exception as exc:  # a screenshot must not hide the test's own failure
                print(f"no screenshot: {exc}")
            page.close()
            server.shutdown_kernels()


@pytest.fixture
def page(
    lab: LabServer, chromium: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Any]:
    """A page in a fresh chromium profile; kernels are shut down through REST afterwards.

    The page's last state is saved as ``test-artifacts/<test>-last.png`` (what was on
    screen when a test failed)."""
    with _page_on(lab, chromium, tmp_path / "chromium-profile", request.node.name) as page:
        yield page


@pytest.fixture(params=[LAB, NOTEBOOK7], ids=["lab", "notebook7"])
def frontend(request: pytest.FixtureRequest) -> Frontend:
    """Each frontend a person may open the notebook in: JupyterLab, Notebook 7 (a different
    app, with its own shell, menus and page, built from the same notebook extension, so
    widgets can break in one and not the other)."""
    chosen: Frontend = request.param
    return chosen


@pytest.fixture
def server(frontend: Frontend, request: pytest.FixtureRequest) -> LabServer:
    """The server of ``frontend`` (``lab`` or ``notebook7``, one per module)."""
    found: LabServer = request.getfixturevalue(frontend.server)
    return found


@pytest.fixture
def frontend_page(
    server: LabServer, chromium: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Any]:
    """Like ``page``, on ``frontend``'s server."""
    with _page_on(server, chromium, tmp_path / "chromium-profile", request.node.name) as page:
        yield page
