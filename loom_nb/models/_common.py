"""What the provider adapters share: the errors a user meets, and bounded retries.

No SDK is imported here. Each adapter turns its SDK's exceptions into one of the
:class:`~loom_nb.ProviderError` subclasses (a :class:`~loom_nb.ModelError`, so the agent loop
records it as the thread's error and keeps what completed) through :class:`ProviderFacts`, and
runs its request through :func:`stream_with_retries`, which retries what is worth retrying with
exponential backoff a bounded number of times, and only before the first event reached the
caller.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from loom_nb._errors import (
    AuthenticationFailed,
    ContextTooLong,
    ModelNotFound,
    ProviderError,
    ProviderUnreachable,
    RateLimited,
    UserError,
)
from loom_nb._messages import ToolCall, new_call_id
from loom_nb.models import ModelEvent, check_allow_model_requests

#: Sent as the key to servers that need none (the SDKs refuse to start without one).
NO_KEY = "not-needed"


class _Closable(Protocol):
    async def close(self) -> None: ...


_Client = TypeVar("_Client", bound=_Closable)


class ClientPerLoop(Generic[_Client]):
    """One SDK client per event loop, made on first use.

    A client holds a connection pool bound to the event loop that used it, so
    ``await agent.run(...)`` and ``agent.run_sync(...)`` (a loop of its own) each need theirs.
    """

    def __init__(self, make: Callable[[], _Client]) -> None:
        self._make = make
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Client] = (
            weakref.WeakKeyDictionary()
        )

    def get(self) -> _Client:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = self._make()
        return client

    async def aclose(self) -> None:
        """Close the running loop's client; the next :meth:`get` makes a new one."""
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()


_CONTEXT_HINTS = (
    "context_length_exceeded",
    "context length",
    "context window",
    "maximum context",
    "prompt is too long",
    "too many tokens",
    "input is too long",
    "reduce the length",
)


def looks_like_context_overflow(*texts: object) -> bool:
    """True when an error message or code says the prompt does not fit the context window."""
    blob = " ".join(str(t) for t in texts if t).lower()
    return any(hint in blob for hint in _CONTEXT_HINTS)


CONTEXT_ADVICE = (
    "Start a new thread, or ask for less data (a smaller limit / max_rows), "
    "or use a model with a larger context window."
)


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
class ProviderFacts:
    """What an adapter knows about where its request went: the errors below say what happened
    there and how to fix it, in the same words for every provider."""

    #: ``"openai:gpt-4.1-mini"``; every message starts with it.
    name: str
    model: str
    #: ``"OpenAI"``, or ``"the server at <base_url>"``.
    where: str
    #: Advice after a refused key, an unknown model, no connection.
    key_advice: str
    not_found_advice: str
    unreachable_advice: str

    def timed_out(self) -> ProviderError:
        return ProviderUnreachable(
            f"{self.name}: {self.where} did not answer in time. Try again, or allow more time "
            "with model_settings={'timeout': <seconds>}."
        )

    def unreachable(self, cause: object) -> ProviderError:
        return ProviderUnreachable(
            f"{self.name}: could not connect to {self.where} ({cause}). {self.unreachable_advice}"
        )

    def unexpected(self, exc: Exception) -> ProviderError:
        return ProviderError(f"{self.name} failed: {type(exc).__name__}: {exc}")

    def status_error(
        self,
        status: int,
        message: str,
        *,
        detail: str,
        retry_after: float | None,
        code: str | None = None,
    ) -> ProviderError:
        """The error for an HTTP ``status`` and the server's ``message`` (and error ``code``),
        shown as ``detail``."""
        name, where = self.name, self.where
        if looks_like_context_overflow(code, message) or status == 413:
            return ContextTooLong(
                f"{name}: the conversation is too long for the model ({detail}). {CONTEXT_ADVICE}",
                status=status,
            )
        if status in (401, 403):
            what = "refused the API key" if status == 401 else "denied access"
            return AuthenticationFailed(
                f"{name}: {where} {what} ({detail}). {self.key_advice}", status=status
            )
        if status == 404:
            return ModelNotFound(
                f"{name}: {where} has no model {self.model!r} ({detail}). {self.not_found_advice}",
                status=status,
            )
        if status == 402:
            return ProviderError(
                f"{name}: {where} needs payment ({detail}). Check your plan and billing.",
                status=status,
            )
        if status == 429:
            if code == "insufficient_quota":  # OpenAI's "no credit left" is a 429 too
                return RateLimited(
                    f"{name}: the account behind this key has no quota left ({detail}). "
                    "Check your plan and billing; retrying will not help.",
                    status=status,
                    retryable=False,
                )
            wait = f" The server asked to wait {retry_after:g} s." if retry_after else ""
            return RateLimited(
                f"{name}: {where} is rate limiting requests ({detail}).{wait} Wait a little and "
                "run again, or allow more retries with max_retries=...",
                status=status,
                retry_after=retry_after,
            )
        if status in (408, 409) or status >= 500:
            busy = "is overloaded" if status == 529 else "failed"
            return ProviderError(
                f"{name}: {where} {busy} ({detail}). This is usually temporary: run again later.",
                status=status,
                retry_after=retry_after,
                retryable=True,
            )
        hint = ""
        if "support tools" in message.lower():
            hint = " Pick a model that supports tool calling, or define the agent without tools."
        return ProviderError(
            f"{name}: {where} refused the request ({detail}).{hint}", status=status
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


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries with exponential backoff.

    ``max_retries`` extra attempts at most (so ``max_retries + 1`` requests in all); the n-th
    wait is ``initial_delay * 2**n`` capped at ``max_delay``, minus up to 25 % jitter. A
    ``Retry-After`` from the server is honoured up to ``max_retry_after`` seconds; a longer
    one stops the retries at once, since waiting that long inside a notebook cell is worse
    than a clear error.
    """

    max_retries: int = 2
    initial_delay: float = 0.5
    max_delay: float = 8.0
    max_retry_after: float = 60.0

    def __post_init__(self) -> None:
        if not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise UserError(f"max_retries must be an int >= 0, got {self.max_retries!r}")
        if self.initial_delay < 0 or self.max_delay < 0:
            raise UserError("retry delays must be >= 0 seconds")

    def delay(self, retry: int, retry_after: float | None) -> float | None:
        """Seconds to wait before retry number ``retry`` (0-based); None: do not retry."""
        if retry_after is not None:
            return retry_after if retry_after <= self.max_retry_after else None
        base = min(self.initial_delay * (2.0**retry), self.max_delay)
        return base * (1.0 - 0.25 * random.random())


async def _sleep(seconds: float) -> None:
    """Indirection so tests can record the backoff without waiting."""
    await asyncio.sleep(seconds)


async def stream_with_retries(
    attempt: Callable[[], AsyncGenerator[ModelEvent, None]],
    translate: Callable[[Exception], ProviderError],
    policy: RetryPolicy,
) -> AsyncIterator[ModelEvent]:
    """Run ``attempt()`` and pass its events on; retry retryable failures before the first
    event was passed on, at most ``policy.max_retries`` times.

    ``check_allow_model_requests()`` is called before every request. Exceptions that are not
    ``Exception`` (cancellation, generator close) pass through untouched, and closing this
    generator closes the attempt's stream, so the HTTP response is released.
    """
    retries = 0
    while True:
        check_allow_model_requests()
        started = False
        stream = attempt()
        try:
            async for event in stream:
                started = True
                yield event
            return
        except ProviderError as exc:
            failure = exc
            cause: Exception = exc
        except Exception as exc:
            failure = translate(exc)
            cause = exc
        finally:
            await stream.aclose()
        wait = None
        if failure.retryable and not started and retries < policy.max_retries:
            wait = policy.delay(retries, failure.retry_after)
        if wait is None:
            failure.attempts = retries + 1
            if failure.retryable and retries:
                failure.args = (f"{failure} Gave up after {retries + 1} attempts.",)
            if failure is cause:
                raise failure
            raise failure from cause
        retries += 1
        await _sleep(wait)


def parse_arguments(raw: str) -> dict[str, Any] | None:
    """Streamed tool arguments: a JSON object, ``{}`` for nothing, else None (bad JSON)."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):  # nested too deeply is unreadable too
        return None
    return value if isinstance(value, dict) else None


def tool_call(call_id: str | None, name: str, raw: str) -> ToolCall:
    """A complete tool call from its streamed pieces; bad JSON keeps the raw text."""
    arguments = parse_arguments(raw)
    return ToolCall(
        call_id or new_call_id(),
        name,
        arguments,
        raw_arguments=None if arguments is not None else raw,
    )
