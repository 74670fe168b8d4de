"""The model contract: one async stream of events per model turn.

Adapters live in their own modules and import their SDK only there; :func:`resolve_model`
has the composition root (``loom_nb._compose``) import one only when a model string asks for it.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypedDict, get_type_hints

from loom_nb import _compose
from loom_nb._errors import UserError
from loom_nb._messages import Message, ToolCall, Usage

__all__ = [
    "Model",
    "ModelEvent",
    "ModelRequest",
    "ModelSettings",
    "TextDelta",
    "ToolDefinition",
    "allow_model_requests",
    "check_allow_model_requests",
    "check_model_settings",
    "resolve_model",
]


class ModelSettings(TypedDict, total=False):
    """Settings passed to the provider; each adapter maps the ones its API knows.

    The provider adapters bound every model turn (seconds; positive numbers):
    ``connect_timeout`` (default 10) to connect; ``idle_timeout`` (default 60) for the answer
    to start, then between two stream events; ``turn_timeout`` (default 300, or longer when
    the two waits above add up to more) for the whole turn, retries included. ``timeout`` is
    one value for each network wait, as the SDKs read it: it sets ``connect_timeout`` and
    ``idle_timeout`` at once, and those keys win over it. ``max_retries`` (default 2, or the
    adapter's ``max_retries=`` argument) is how many times a failed request is tried again
    (rate limits, overload, 5xx, network errors; before the answer starts only).

    ``history_tokens`` (default 32,000) is loom_nb's own: the budget of what the model is sent
    of a thread; older tool results go by reference beyond it (``loom_nb._history``).
    """

    temperature: float
    max_tokens: int
    top_p: float
    timeout: float
    connect_timeout: float
    idle_timeout: float
    turn_timeout: float
    history_tokens: int
    max_retries: int


def check_model_settings(settings: object) -> ModelSettings:
    """``settings`` checked key by key against :class:`ModelSettings` (its keys are the one
    list of what is allowed); a :class:`UserError` names the key, the value and the fix."""
    if settings is None:
        return ModelSettings()
    if not isinstance(settings, Mapping):
        raise UserError(
            "model_settings must be a dict like {'temperature': 0, 'max_tokens': 800}, "
            f"got {type(settings).__name__} {settings!r}"
        )
    allowed = get_type_hints(ModelSettings)
    for key, value in settings.items():
        if key not in allowed:
            import difflib

            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise UserError(
                f"model_settings has no setting {key!r}: {hint}the settings are "
                f"{', '.join(allowed)}"
            )
        kind = allowed[key]
        number = not isinstance(value, bool) and isinstance(value, kind | int)
        if key.endswith("timeout") and (not number or not math.isfinite(value) or value <= 0):
            raise UserError(
                f"model_settings[{key!r}] must be a positive number of seconds, got {value!r}"
            )
        if not number or not math.isfinite(value):
            what = "a whole number" if kind is int else "a number"
            raise UserError(f"model_settings[{key!r}] must be {what}, got {value!r}")
        if key == "max_retries" and value < 0:
            raise UserError(f"model_settings['max_retries'] must be 0 or more, got {value!r}")
        if key in ("max_tokens", "history_tokens") and value < 1:
            raise UserError(f"model_settings[{key!r}] must be 1 or more, got {value!r}")
        if key in ("temperature", "top_p") and value < 0:
            raise UserError(f"model_settings[{key!r}] must be 0 or more, got {value!r}")
    return ModelSettings(**settings)  # type: ignore[typeddict-item]


@dataclass
class ToolDefinition:
    """A tool as the model sees it."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass
class ModelRequest:
    """Everything one model turn is given."""

    instructions: str | None
    #: The thread so far (read-only; a run's thread only grows, so this is no copy).
    messages: Sequence[Message]
    tools: list[ToolDefinition] = field(default_factory=list)
    settings: ModelSettings = field(default_factory=lambda: ModelSettings())


@dataclass
class TextDelta:
    """A piece of the assistant's text, as it streams."""

    text: str


#: A model turn yields text deltas, complete tool calls, and usage.
ModelEvent = TextDelta | ToolCall | Usage


class Model(ABC):
    """A chat model that can call tools."""

    #: "provider:model", shown in threads and errors.
    name: str = "model"

    @abstractmethod
    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Run one model turn, yielding events as they arrive.

        Tool calls are yielded once complete; arguments that are not a JSON object come as
        ``ToolCall(arguments=None, raw_arguments=...)``. Provider failures raise
        :class:`~loom_nb.ModelError` with a message that says what to do.
        """


_PROVIDERS = _compose.MODEL_PROVIDERS

_EXAMPLES = {
    "openai": "openai:gpt-4.1-mini",
    "ollama": "ollama:llama3.2",
    "anthropic": "anthropic:claude-sonnet-4-5",
}


def resolve_model(model: Model | str) -> Model:
    """``"openai:gpt-4.1-mini"``, ``"anthropic:claude-sonnet-4-5"``, ``"ollama:llama3.2"`` or a
    :class:`Model`."""
    if isinstance(model, Model):
        return model
    if not isinstance(model, str) or ":" not in model:
        raise UserError(
            f"model {model!r} is not a model: pass a Model object or a string like "
            f"'openai:gpt-4.1-mini', one of the providers {sorted(_PROVIDERS)}"
        )
    provider, _, name = model.partition(":")
    if provider in _PROVIDERS and not name.strip():
        raise UserError(
            f"model {model!r} names no model after {provider + ':'!r}: write it as "
            f"'{provider}:<model name>', e.g. {_EXAMPLES[provider]!r}"
        )
    if provider not in _PROVIDERS:
        raise UserError(
            f"unknown model provider {provider!r} in {model!r}; use one of {sorted(_PROVIDERS)} "
            "(any OpenAI-compatible server works as 'openai:<model>' with base_url), "
            "or pass a Model object"
        )
    result: Model = _compose.model_adapter(provider, name)
    return result


_allow_requests = True


def check_allow_model_requests() -> None:
    """Adapters call this before each request; the test suite turns requests off."""
    if not _allow_requests:
        raise RuntimeError(
            "model requests are turned off (loom_nb.models.allow_model_requests(False)); "
            "use a ReplayModel or FunctionModel in tests"
        )


@contextmanager
def allow_model_requests(allowed: bool = True) -> Iterator[None]:
    """Turn real model requests on or off for a block (tests turn them off globally)."""
    global _allow_requests
    before, _allow_requests = _allow_requests, allowed
    try:
        yield
    finally:
        _allow_requests = before
