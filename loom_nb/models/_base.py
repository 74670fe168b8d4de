"""The life of one streamed model turn, the same for every provider SDK.

:class:`StreamingAdapter` holds what is not SDK-specific: the client per event loop, the
base URL and key rules' shared parts, the deadlines of ``model_settings``, bounded retries
before the first event, and deciding what went wrong (no connection, no answer, dropped
mid-answer, a malformed event, an answer that is not an event stream, an error the server
sent). An adapter module subclasses it with its SDK's request building and event decoding.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from abc import abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, ClassVar, Generic, NamedTuple, Protocol, TypeVar
from urllib.parse import urlsplit

from loom_nb._errors import MissingAPIKey, ProviderError, UserError
from loom_nb.models import Model, ModelEvent, ModelRequest, check_allow_model_requests
from loom_nb.models._clients import ClientPerLoop
from loom_nb.models._deadlines import Deadlines, Expired, expires_at
from loom_nb.models._provider_errors import ProviderFacts
from loom_nb.models._retries import RetryPolicy
from loom_nb.models._server_errors import ServerError

RawEvent = TypeVar("RawEvent")
Prepared = TypeVar("Prepared")
_RawOut = TypeVar("_RawOut", covariant=True)
_RawIn = TypeVar("_RawIn", contravariant=True)


class SDKClient(Protocol):
    """What the base needs of an SDK's async client."""

    @property
    def base_url(self) -> Any: ...

    def with_options(self, *, max_retries: int) -> Any: ...

    async def close(self) -> None: ...


Client = TypeVar("Client", bound=SDKClient)


class _Response(Protocol):
    @property
    def url(self) -> Any: ...

    @property
    def headers(self) -> Mapping[str, str]: ...


class SDKStream(Protocol[_RawOut]):
    """An SDK's open event stream: its HTTP response, its events, a way to let it go."""

    @property
    def response(self) -> _Response: ...

    def __aiter__(self) -> AsyncIterator[_RawOut]: ...

    async def close(self) -> None: ...


class Decoder(Protocol[_RawIn]):
    """Turns one turn's SDK events into loom events."""

    def feed(self, raw: _RawIn) -> list[ModelEvent]: ...

    def finish(self) -> list[ModelEvent]:
        """What only the end of the stream completes (tool calls, usage)."""
        ...


class Advice(NamedTuple):
    """What to check after a refused key, an unknown model, no connection."""

    key: str
    not_found: str
    unreachable: str


class StreamingAdapter(Model, Generic[Client, Prepared, RawEvent]):
    """A model behind an HTTP API that streams server-sent events, through its official SDK."""

    #: The SDK's async client class (a sync one passed as ``client=`` is refused).
    client_class: ClassVar[type[Any]]
    #: ``"OpenAI"``: how errors name the vendor's own API.
    vendor: ClassVar[str]
    vendor_host: ClassVar[str]
    default_base_url: ClassVar[str]
    base_url_env: ClassVar[str]
    #: The environment variable that holds the key (an adapter may set it per model).
    _api_key_env: str

    def __init__(
        self,
        model: str,
        *,
        provider: str,
        base_url: str | None,
        api_key: str | None,
        client: Client | None,
        max_retries: int,
        retry_delay: float,
        max_retry_delay: float,
    ) -> None:
        self.model_name = model
        self.name = f"{provider}:{model}"
        self.provider = provider
        self._base_url = base_url
        self._api_key = api_key
        self.retry = RetryPolicy(max_retries, retry_delay, max_retry_delay)
        if client is not None and not isinstance(client, self.client_class):
            kind = self.client_class
            raise UserError(
                f"client= takes an {kind.__module__.split('.')[0]}.{kind.__name__} (loom_nb "
                f"runs are async), got {type(client).__name__}"
            )
        # The SDK's retries would multiply with ours: one bound, ours.
        self._client: Client | None = (
            client.with_options(max_retries=0) if client is not None else None
        )
        self._clients = ClientPerLoop(self._new_client)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model_name!r}, base_url={self.base_url!r})"

    @property
    def base_url(self) -> str:
        """The server requests go to."""
        if self._client is not None:
            return str(self._client.base_url).rstrip("/")
        url = self._base_url or os.environ.get(self.base_url_env) or self.default_base_url
        return url.rstrip("/")

    @property
    def at_vendor(self) -> bool:
        """True when requests go to the vendor's own API (not a compatible server)."""
        return (urlsplit(self.base_url).hostname or "").endswith(self.vendor_host)

    async def aclose(self) -> None:
        """Close the connections this model opened on the running event loop (a client you
        passed in stays yours to close). The model stays usable: it reconnects when asked."""
        await self._clients.aclose()

    # ---- advice in the same words for every adapter ----------------------------------------

    def _missing_key(self) -> MissingAPIKey:
        """The vendor's own API needs a key and none is set: said before anything is sent."""
        return MissingAPIKey(
            f"{self.name} needs an {self.vendor} API key and none is set: set the "
            f"{self._api_key_env} environment variable (or pass api_key=... to "
            f"{type(self).__name__}). Nothing was sent."
        )

    def _key_advice(self, also: str = "") -> str:
        """What to check after a refused key (``also``: one more thing, like the server)."""
        return (
            f"Check the key in the {self._api_key_env} environment variable (or api_key=...){also}."
        )

    def _unreachable_advice(self) -> str:
        """What to check when no connection was made."""
        if self.at_vendor:
            return "Check your network connection."
        return f"Is the server running? Check base_url=... (or {self.base_url_env})."

    # ---- what each adapter says -------------------------------------------------------------

    @abstractmethod
    def _new_client(self) -> Client:
        """A client for this event loop, with the SDK's retries off; raises
        :class:`~loom_nb.MissingAPIKey` when the server needs a key and none is set."""

    @abstractmethod
    def _advice(self) -> Advice: ...

    @abstractmethod
    def _prepare(self, request: ModelRequest) -> Prepared:
        """The request's messages and tools in the API's shape (once per turn)."""

    @abstractmethod
    async def _open(
        self, client: Client, prepared: Prepared, request: ModelRequest, deadlines: Deadlines
    ) -> SDKStream[RawEvent]:
        """Send the request with the SDK, with ``deadlines.connect`` for connecting and
        ``deadlines.idle`` for each read; return once the answer's headers are in."""

    @abstractmethod
    def _decoder(self) -> Decoder[RawEvent]: ...

    @abstractmethod
    def _server_error(self, exc: Exception) -> ServerError | None:
        """What the server answered, when ``exc`` is the SDK's error for an HTTP error status
        or an error event; None for anything else."""

    # ---- one turn ---------------------------------------------------------------------------

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        deadlines = Deadlines.from_settings(request.settings)
        client = self._client if self._client is not None else self._clients.get()
        prepared = self._prepare(request)
        clock = _TurnClock(deadlines.turn)
        retry = self.retry
        if "max_retries" in request.settings:  # this agent's (or run's) setting wins
            retry = dataclasses.replace(retry, max_retries=request.settings["max_retries"])
        retries = 0
        while True:
            check_allow_model_requests()
            started = False
            attempt = self._attempt(client, prepared, request, deadlines, clock)
            try:
                async for event in attempt:
                    started = True
                    yield event
                return
            except ProviderError as exc:
                failure = exc
            finally:  # closing this generator closes the attempt's HTTP response
                await attempt.aclose()
            wait = None
            if failure.retryable and not started and retries < retry.max_retries:
                wait = retry.delay(retries, failure.retry_after)
                if wait is not None and clock.left() <= wait:
                    wait = None  # the turn's deadline would pass while waiting
            if wait is None:
                failure.attempts = retries + 1
                if failure.retryable and retries:
                    failure.args = (f"{failure} Gave up after {retries + 1} attempts.",)
                raise failure
            retries += 1
            await _sleep(wait)

    async def _attempt(
        self,
        client: Client,
        prepared: Prepared,
        request: ModelRequest,
        deadlines: Deadlines,
        clock: _TurnClock,
    ) -> AsyncGenerator[ModelEvent, None]:
        """One request: its events, or a :class:`ProviderError` that says what happened."""
        facts = self._facts()
        opened: SDKStream[RawEvent] | None = None
        raw_events: AsyncIterator[RawEvent] | None = None
        try:
            async with clock.within(deadlines.connect + deadlines.idle):
                opened = await self._open(client, prepared, request, deadlines)
            url = str(opened.response.url)
            content_type = opened.response.headers.get("content-type", "")
            if content_type and not content_type.lower().startswith("text/event-stream"):
                raise facts.not_an_event_stream(url, content_type)
            decoder = self._decoder()
            raw_events = opened.__aiter__()
            seen = False
            while True:
                try:
                    async with clock.within(deadlines.idle):
                        raw = await raw_events.__anext__()
                except StopAsyncIteration:
                    break
                seen = True
                try:
                    events = decoder.feed(raw)
                except Exception as exc:
                    raise facts.malformed(_cause_text(exc)) from exc
                for event in events:
                    yield event
            if not seen:
                raise facts.no_event(url, content_type)
            for event in decoder.finish():
                yield event
        except ProviderError:
            raise
        except Expired:
            if clock.cut_by_turn:
                raise facts.turn_expired(deadlines.turn) from None
            if opened is None:
                raise facts.no_answer(deadlines.idle) from None
            raise facts.stalled(deadlines.idle) from None
        except Exception as exc:
            raise self._translate(exc, answered=opened is not None, deadlines=deadlines) from exc
        finally:
            close = getattr(raw_events, "aclose", None)
            if close is not None:
                await close()
            if opened is not None:
                await opened.close()

    def _facts(self) -> ProviderFacts:
        advice = self._advice()
        where = self.vendor if self.at_vendor else f"the server at {self.base_url}"
        return ProviderFacts(
            self.name, self.model_name, where, advice.key, advice.not_found, advice.unreachable
        )

    def _translate(self, exc: Exception, *, answered: bool, deadlines: Deadlines) -> ProviderError:
        """An SDK or transport exception as an error that says what happened and what to do."""
        facts = self._facts()
        server = self._server_error(exc)
        if server is not None:
            return facts.server_error(server)
        names = _names_along_causes(exc)
        if names & _TIMED_OUT:
            if answered:
                return facts.stalled(deadlines.idle)
            if names & _CONNECT_FAILED:
                return facts.connect_timed_out(deadlines.connect)
            return facts.no_answer(deadlines.idle)
        if names & _TRANSPORT_FAILED:
            if answered:
                return facts.dropped(_cause_text(exc))
            if names & _CONNECT_FAILED:
                return facts.refused(_cause_text(exc))
            return facts.closed_without_answer(_cause_text(exc))
        if answered and isinstance(exc, ValueError):  # an event that is not JSON, or not the API's
            what = "not JSON: " if isinstance(exc, json.JSONDecodeError) else ""
            return facts.malformed(_cause_text(exc, what))
        return facts.unexpected(exc)


# Exception class names along an error's causes that say what happened to the connection: the
# SDKs' own (APITimeoutError, APIConnectionError), their transports' (httpx and httpx2 share
# these names), and the standard library's.
_TIMED_OUT = frozenset({"APITimeoutError", "TimeoutException", "TimeoutError"})
_CONNECT_FAILED = frozenset({"ConnectError", "ConnectTimeout", "ConnectionRefusedError"})
_TRANSPORT_FAILED = frozenset({"APIConnectionError", "TransportError", "ConnectionError"})


def _causes(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain and len(chain) < 10:
        chain.append(current)
        current = current.__cause__
    return chain


def _names_along_causes(exc: BaseException) -> set[str]:
    return {kind.__name__ for e in _causes(exc) for kind in type(e).__mro__}


def _cause_text(exc: BaseException, what: str = "") -> str:
    """`` (what the innermost cause says)``, or nothing when it says nothing."""
    text = str(_causes(exc)[-1]).strip().rstrip(".")
    return f" ({what}{text})" if text else ""


class _TurnClock:
    """The deadline of one model turn, and the shorter waits inside it."""

    def __init__(self, seconds: float) -> None:
        self._loop = asyncio.get_running_loop()
        self._end = self._loop.time() + seconds
        #: Whether the wait armed last ends at the turn's deadline rather than its own.
        self.cut_by_turn = False

    def left(self) -> float:
        return self._end - self._loop.time()

    def within(self, seconds: float) -> AbstractAsyncContextManager[None]:
        """``async with clock.within(s):`` raises :class:`Expired` after ``s`` seconds, or at
        the turn's deadline if that comes first."""
        when = self._loop.time() + seconds
        self.cut_by_turn = when >= self._end
        return expires_at(min(when, self._end))


async def _sleep(seconds: float) -> None:
    """Indirection so tests can record the backoff without waiting."""
    await asyncio.sleep(seconds)
