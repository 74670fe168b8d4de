"""The error tree: mistakes a user can fix vs. failures of a run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from loom_nb._messages import PendingApproval


class LoomError(Exception):
    """Base class of every error loom_nb raises on purpose."""


class UserError(LoomError):
    """A mistake in how loom_nb was configured or called. The message says how to fix it."""


class DuplicateToolError(UserError):
    """Two tools of one agent share a name."""


class ThreadNotFound(UserError, LookupError):
    """No thread with this id is visible to the caller."""


class ThreadBusy(UserError):
    """Another run holds the thread: in another kernel, or another agent object here. One run
    per thread at a time keeps every tool call next to its result."""


class ThreadWaiting(UserError):
    """A new prompt went to a thread whose calls wait: for Approve / Reject, or, when their
    kernel stopped while they ran, for the user's word on what happened. Nothing was sent."""

    def __init__(self, message: str, *, thread_id: str, waiting: Sequence[PendingApproval]) -> None:
        super().__init__(message)
        self.thread_id = thread_id
        #: The calls in the way, those whose outcome is unknown first.
        self.waiting = tuple(waiting)


class CallAlreadyDecided(UserError):
    """The call was decided, claimed or finished elsewhere first; nothing was run here."""

    def __init__(self, call_id: str, state: str) -> None:
        super().__init__(
            f"call {call_id} was already decided in another kernel; reload the thread to see "
            f"where it is (it is {state} now): " + way_on(call_id, state)
        )
        self.call_id = call_id
        #: Its state as the store has it ("done" once its result is saved).
        self.state = state


def way_on(call_id: str, state: str) -> str:
    """What moves a call in ``state`` on: the card's button, the ``%loom`` command and the
    API call, for every message that refuses something because of it."""
    if state in ("approved", "rejected"):
        yes = state == "approved"
        return (
            f"it has not run yet (its kernel stopped first): go on with the card's Continue "
            f"button, %loom {'approve' if yes else 'reject'} {call_id}, or "
            f"agent.resume(thread_id, {{{call_id!r}: {yes}}})"
        )
    if state == "unknown":
        return (
            "its outcome is unknown (its kernel stopped while it ran): choose on its card, with "
            f"%loom resolve {call_id} happened|retry|failed, or agent.resume(thread_id, "
            f"{{{call_id!r}: 'happened' | 'retry' | 'failed'}})"
        )
    if state == "running":
        return (
            "a run in another kernel is running it: reload the thread when that run ends "
            "(%loom show THREAD_ID, or agent.thread(thread_id))"
        )
    if state == "pending":
        return f"decide it on its card, with %loom approve|reject {call_id}, or agent.resume"
    return "its result is saved: see it with %loom show THREAD_ID or agent.thread(thread_id)"


class MissingExtra(UserError, ImportError):
    """An optional dependency is not installed."""

    def __init__(self, package: str, extra: str, feature: str) -> None:
        super().__init__(
            f"{feature} needs the '{package}' package, which is not installed. "
            f"Install it with: pip install 'loom-nb[{extra}]'"
        )


class StoreError(LoomError):
    """A store could not read or save: its server went away or failed mid-operation.

    The message names the server. A write that raised this wrote nothing, or (when the server
    failed during the commit itself) says that it may have been saved.
    """


class StoreUnreachable(StoreError):
    """A store's server could not be reached or went away during the call (a restart, an
    outage); the next call reconnects once it is back."""


class StoreTimeout(StoreError):
    """A store's server did not answer within the store's deadline (``timeout``); the message
    says what may and may not have been saved."""


class RunError(LoomError):
    """A run failed. What completed before the failure is saved in the thread."""

    def __init__(self, message: str, *, result: Any = None) -> None:
        super().__init__(message)
        #: The :class:`~loom_nb.RunResult` of the failed run, when there is one.
        self.result = result


class ModelError(RunError):
    """The model provider failed: bad key, unknown model, rate limit, network, context too long."""


class StepLimitExceeded(RunError):
    """The agent made more model turns than ``max_steps`` allows."""


class HistoryTooLong(RunError):
    """What the model must be sent of a thread (its latest question and newest turn) does not
    fit ``model_settings["history_tokens"]``, even with older results by reference and older
    turns left out."""


class ProviderError(ModelError):
    """A model provider failed. ``status`` is the HTTP status when there was one."""

    #: Worth another attempt (rate limit, overload, 5xx, network).
    retryable: bool = False

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        retryable: bool | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        #: Seconds the server asked us to wait (Retry-After), when it said.
        self.retry_after = retry_after
        if retryable is not None:
            self.retryable = retryable
        #: How many attempts were made before giving up (set by the retry loop).
        self.attempts = 1


class MissingAPIKey(ProviderError):
    """No API key was found; nothing was sent."""


class AuthenticationFailed(ProviderError):
    """The server refused the key (401 / 403)."""


class ModelNotFound(ProviderError):
    """The server does not know this model (404)."""


class RateLimited(ProviderError):
    """Too many requests (429) and the retries ran out, or the wait asked for is too long."""

    retryable = True


class ContextTooLong(ProviderError):
    """The conversation no longer fits the model's context window."""


class ProviderUnreachable(ProviderError):
    """No connection to the server, or no answer in time."""

    retryable = True
