"""Fixtures for the Supabase integration tests: one throwaway PostgreSQL per test session,
Supabase-style roles and RLS, a strict PostgREST-subset shim in front (see rig/)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import require
from tests.supabase.rig import Rig, missing_reason


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
