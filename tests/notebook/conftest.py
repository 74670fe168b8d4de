"""Kernels with ipykernel 6.31 / 7.3 / 7.4 for the notebook tests (see nb_kernels.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import require
from tests.notebook.nb_kernels import VERSIONS, build


@pytest.fixture(scope="session", params=list(VERSIONS), ids=[f"ipykernel-{v}" for v in VERSIONS])
def kernel(request: pytest.FixtureRequest) -> tuple[str, Path]:
    """(kernel name, kernelspec folder) for each ipykernel version."""
    try:
        return build(request.param)
    except (subprocess.SubprocessError, OSError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        require(False, f"could not install ipykernel {request.param}: {detail[-300:]}")
        raise
