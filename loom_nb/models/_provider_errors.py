"""The words of every error a user meets from a provider, the same for every provider.

:class:`ProviderFacts` words each failure as one of the :class:`~loom_nb.ProviderError`
subclasses (a :class:`~loom_nb.ModelError`, so the agent loop records it as the thread's error
and keeps what completed); ``_base.StreamingAdapter`` decides which failure it was.
"""

from __future__ import annotations

from dataclasses import dataclass

from loom_nb._errors import (
    AuthenticationFailed,
    ContextTooLong,
    ModelNotFound,
    ProviderError,
    ProviderUnreachable,
    RateLimited,
)
from loom_nb.models._server_errors import ServerError

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


#: Error events inside a stream carry a code instead of a status; these read as one.
_STREAM_ERROR_STATUS = {
    "rate_limit_error": 429,
    "rate_limit_exceeded": 429,
    "overloaded_error": 529,
    "overloaded": 529,
    "api_error": 500,
    "server_error": 500,
}


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

    # ---- the connection and its deadlines -------------------------------------------------

    def refused(self, cause: str) -> ProviderError:
        """No connection at all (refused, unknown host)."""
        return ProviderUnreachable(
            f"{self.name}: could not connect to {self.where}{cause}. {self.unreachable_advice}"
        )

    def connect_timed_out(self, seconds: float) -> ProviderError:
        return ProviderUnreachable(
            f"{self.name}: could not connect to {self.where} within connect_timeout={seconds:g} "
            f"s. {self.unreachable_advice} If it is only slow, allow more time with "
            "model_settings={'connect_timeout': <seconds>}."
        )

    def closed_without_answer(self, cause: str) -> ProviderError:
        return ProviderUnreachable(
            f"{self.name}: {self.where} closed the connection without answering{cause}. "
            "This is usually temporary: run again."
        )

    def no_answer(self, seconds: float) -> ProviderError:
        """Connected, and then nothing came back."""
        return ProviderUnreachable(
            f"{self.name}: {self.where} accepted the connection but sent no answer within "
            f"idle_timeout={seconds:g} s. Try again, or allow more time with "
            "model_settings={'idle_timeout': <seconds>}."
        )

    def stalled(self, seconds: float) -> ProviderError:
        """The answer started, then stopped."""
        return ProviderUnreachable(
            f"{self.name}: {self.where} stopped sending mid-answer: no event for "
            f"idle_timeout={seconds:g} s. Run again, or allow longer pauses with "
            "model_settings={'idle_timeout': <seconds>}."
        )

    def dropped(self, cause: str) -> ProviderError:
        return ProviderUnreachable(
            f"{self.name}: the connection to {self.where} dropped mid-answer{cause}. "
            "This is usually temporary: run again."
        )

    def turn_expired(self, seconds: float) -> ProviderError:
        return ProviderUnreachable(
            f"{self.name}: {self.where} did not finish its answer within "
            f"turn_timeout={seconds:g} s (the deadline of one model turn, retries included). "
            "Run again, ask for a shorter answer, or allow more time with "
            "model_settings={'turn_timeout': <seconds>}.",
            retryable=False,
        )

    # ---- answers that are not what the API defines ----------------------------------------

    def not_an_event_stream(self, url: str, content_type: str) -> ProviderError:
        return ProviderError(
            f"{self.name}: {url} answered with {content_type!r}, not an event stream. Is "
            "base_url the API itself, and not a proxy's login page or a web page?"
        )

    def no_event(self, url: str, content_type: str) -> ProviderError:
        return ProviderError(
            f"{self.name}: {url} answered with a stream that ended with no event (content "
            f"type {content_type!r}). Run again; if it repeats, check base_url and the "
            "server's logs."
        )

    def malformed(self, cause: str) -> ProviderError:
        return ProviderError(
            f"{self.name}: {self.where} sent a malformed event mid-answer{cause}. Run again; "
            "if it repeats, the server (or a proxy in between) does not speak the API."
        )

    def unexpected(self, exc: Exception) -> ProviderError:
        return ProviderError(f"{self.name} failed: {type(exc).__name__}: {exc}")

    # ---- what the server said -------------------------------------------------------------

    def server_error(self, error: ServerError) -> ProviderError:
        """The error for an HTTP error status, or for an error event inside the stream."""
        code = error.code
        if error.status is not None:
            status: int | None = error.status
            detail = f"{status}: {error.message}"
        else:
            status = _STREAM_ERROR_STATUS.get(code or "")
            if status is None and code and code.isdigit():
                status = int(code)
            detail = f"error event{f' {code}' if code else ''}: {error.message}"
        if looks_like_context_overflow(code, error.message) or status == 413:
            return ContextTooLong(
                f"{self.name}: the conversation is too long for the model ({detail}). "
                f"{CONTEXT_ADVICE}",
                status=error.status,
            )
        if status is None:
            return ProviderError(
                f"{self.name}: {self.where} reported an error mid-answer ({detail})."
            )
        return self._status_error(status, error, detail)

    def _status_error(self, status: int, error: ServerError, detail: str) -> ProviderError:
        name, where, retry_after = self.name, self.where, error.retry_after
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
            if error.code == "insufficient_quota":  # OpenAI's "no credit left" is a 429 too
                return RateLimited(
                    f"{name}: the account behind this key has no quota left ({detail}). "
                    "Check your plan and billing; retrying will not help.",
                    status=status,
                    retryable=False,
                )
            wait = f" The server asked to wait {retry_after:g} s." if retry_after else ""
            return RateLimited(
                f"{name}: {where} is rate limiting requests ({detail}).{wait} Wait a little and "
                "run again, or allow more retries with model_settings={'max_retries': 5}.",
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
        if "support tools" in error.message.lower():
            hint = " Pick a model that supports tool calling, or define the agent without tools."
        return ProviderError(
            f"{name}: {where} refused the request ({detail}).{hint}", status=status
        )
