"""pytest fixtures: ``lab`` (one JupyterLab per module) and ``page`` (a fresh chromium page);
``notebook7`` (one Notebook 7 server per module) and ``notebook7_page`` the same way."""

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


@pytest.fixture
def notebook7_page(
    notebook7: LabServer, chromium: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Any]:
    """Like ``page``, for the ``notebook7`` server."""
    with _page_on(notebook7, chromium, tmp_path / "chromium-profile", request.node.name) as page:
        yield page
