"""The chart tests draw with matplotlib: skipped without it on a developer's machine, failed
in CI."""

from __future__ import annotations

import importlib.util

import pytest

from tests.conftest import require


@pytest.fixture(autouse=True)
def _matplotlib() -> None:
    require(
        importlib.util.find_spec("matplotlib") is not None,
        "matplotlib is not installed (pip install 'loom-nb[charts]')",
    )
