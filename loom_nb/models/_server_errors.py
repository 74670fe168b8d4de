"""What an SDK's exception says the server answered, read the same way for every provider: the
status, the body's message, the error code, and how long the server asked to wait. No SDK is
imported here; ``_provider_errors`` words what it means for the user."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any


def body_message(body: object) -> str:
    """The human part of an error body: ``{"error": {"message": ...}}`` in its variants."""
    if isinstance(body, dict):
        if isinstance(body.get("message"), str):
            return str(body["message"])
        if "error" in body:
            return body_message(body["error"])
        return json.dumps(body)[:500]
    if isinstance(body, str):
        return body[:500]
    return ""


@dataclass(frozen=True)
class ServerError:
    """What an SDK exception says the server answered: an HTTP error status, or an error event
    inside a 200 stream (``status`` None)."""

    status: int | None
    message: str
    #: The error's code or type (``"rate_limit_exceeded"``, ``"overloaded_error"``, ...).
    code: str | None = None
    retry_after: float | None = None


def status_error(
    exc: Any, status: int | None, code: str | None, message: str | None = None
) -> ServerError:
    """What an SDK's ``APIStatusError`` says (the OpenAI and Anthropic SDKs share its shape:
    ``body``, ``message``, ``response``): ``message`` when the SDK read one, else the body's."""
    return ServerError(
        status,
        message or body_message(exc.body) or exc.message,
        code,
        parse_retry_after(exc.response.headers),
    )


def parse_retry_after(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` / ``retry-after`` (seconds) headers, if present."""
    if headers is None:
        return None
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        try:
            value = headers.get(name)
        except Exception:
            return None
        if value is None:
            continue
        try:
            seconds = float(value) / divisor
        except (TypeError, ValueError):
            continue  # an HTTP date: ignore it and use our own backoff
        if math.isfinite(seconds) and seconds >= 0:
            return seconds
    return None
