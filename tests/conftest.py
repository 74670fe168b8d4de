"""Shared test setup: no model requests, no internet, no silent skips in CI, a default store
of each test's own, and the PostgreSQL server for the tests that need one."""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from loom_nb.models import allow_model_requests

if TYPE_CHECKING:
    from tests.postgres_server import LoomDatabase, Postgres

#: In CI (.ci/run sets it) a test that cannot find its real parts fails instead of skipping.
REQUIRE_ALL = os.environ.get("LOOM_REQUIRE_ALL") == "1"


def require(condition: bool, reason: str) -> None:
    """Skip when a real part is missing on a developer's machine; fail in CI."""
    if condition:
        return
    if REQUIRE_ALL:
        pytest.fail(f"required for CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(autouse=True, scope="session")
def _no_model_requests():
    """Real model adapters refuse to send; tests against local servers turn this back on."""
    with allow_model_requests(False):
        yield


_real_connect = socket.socket.connect


def _loopback_only(self: socket.socket, address: object) -> object:
    if self.family in (socket.AF_INET, socket.AF_INET6) and isinstance(address, tuple):
        host = address[0]
        try:
            ok = ipaddress.ip_address(host).is_loopback
        except ValueError:
            ok = host == "localhost"
        if not ok:
            raise OSError(f"tests may not reach the network: connection to {host!r} refused")
    return _real_connect(self, address)


@pytest.fixture(autouse=True, scope="session")
def _no_internet():
    """Every socket a test opens in this process goes to loopback, or fails loudly."""
    socket.socket.connect = _loopback_only  # type: ignore[method-assign]
    yield
    socket.socket.connect = _real_connect  # type: ignore[method-assign]


@pytest.fixture(autouse=True)
def _default_store_of_this_test(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An agent defined without ``store=`` keeps threads in this test's own SQLite file (and
    so do kernels the test starts): no test reads another's threads or the user's .loom/."""
    from loom_nb import _store

    monkeypatch.setenv(_store.STORE_VARIABLE, str(tmp_path / "default-store" / "loom.db"))
    yield
    with _store._defaults_lock:
        opened = list(_store._defaults.values())
        _store._defaults.clear()
    for store in opened:
        store.close()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Postgres]:
    """A throwaway PostgreSQL on loopback for the session (fsync off: tests kill clients)."""
    from tests.postgres_server import Postgres, find_bin_dir, missing_reason

    reason = missing_reason()
    require(reason is None, f"PostgreSQL: {reason}")
    bin_dir = find_bin_dir()
    assert bin_dir is not None
    server = Postgres(bin_dir).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def loom_database(postgres_server: Postgres) -> LoomDatabase:
    """The session's database with an owner and a least-privileged app role."""
    from tests.postgres_server import LoomDatabase

    return LoomDatabase.create(postgres_server)


@pytest.fixture
def postgres_schema(loom_database: LoomDatabase) -> Iterator[str]:
    """A fresh store schema for one test (made by the owner, granted to the app role)."""
    name = loom_database.new_schema()
    yield name
    loom_database.drop_schema(name)
