"""Fixtures for the Supabase integration tests: one throwaway PostgreSQL per test session,
Supabase-style roles and RLS, a strict PostgREST-subset shim in front (see rig/)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# `tests` is importable when the repository is installed in development mode (make test);
# this makes it so for a bare `pytest tests/supabase` too.
_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.append(_ROOT)

from tests.conftest import require  # noqa: E402
from tests.supabase.rig import Rig, missing_reason  # noqa: E402


@pytest.fixture(scope="session")
def supabase_rig_session() -> Iterator[Rig]:
    """Started once per session (about a second): PostgreSQL, schema, seed rows, shim."""
    reason = missing_reason()
    require(reason is None, f"Supabase rig: {reason}")
    rig = Rig.start()
    try:
        yield rig
    finally:
        rig.stop()


@pytest.fixture
def rig(supabase_rig_session: Rig) -> Rig:
    """The rig with the seed rows restored and an empty shim log."""
    supabase_rig_session.reset()
    return supabase_rig_session
