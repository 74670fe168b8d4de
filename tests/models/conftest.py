"""Fixtures for the model adapters: a local wire server, each adapter on it, a clean
environment, no real retry waits."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from loom_nb.models import allow_model_requests
from tests.models._adapters import AnthropicCase, OpenAICase
from tests.models._wire import OPENED, WireServer

#: Variables the SDKs and adapters read; a developer's own settings must not leak into tests.
PROVIDER_ENV = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "OPENAI_ADMIN_KEY",
    "OPENAI_CUSTOM_HEADERS",
    "OLLAMA_HOST",
    "OLLAMA_API_KEY",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_PROFILE",
    "ANTHROPIC_CUSTOM_HEADERS",
)


@pytest.fixture(autouse=True)
def _clean_provider_env(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("live") is None:
        for name in PROVIDER_ENV:
            monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server() -> Iterator[WireServer]:
    """A scripted provider on 127.0.0.1, with model requests allowed for this test."""
    wire = WireServer()
    try:
        with allow_model_requests(True):
            yield wire
    finally:
        wire.close()


# One fixture per adapter; test_contract.py runs every contract test over each.


@pytest.fixture
def openai_case(server: WireServer) -> OpenAICase:
    return OpenAICase(server)


@pytest.fixture
def anthropic_case(server: WireServer) -> AnthropicCase:
    return AnthropicCase(server)


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Records each retry backoff instead of waiting it."""
    recorded: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        recorded.append(seconds)

    monkeypatch.setattr("loom_nb.models._base._sleep", fake_sleep)
    return recorded


@pytest.fixture(autouse=True)
async def _close_models() -> AsyncIterator[None]:
    yield
    while OPENED:
        opened = OPENED.pop()
        await (getattr(opened, "aclose", None) or opened.close)()
