"""Shared test setup: no model requests, no internet, and no silent skips in CI."""

from __future__ import annotations

import ipaddress
import os
import socket

import pytest

from loom_nb.models import allow_model_requests

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
