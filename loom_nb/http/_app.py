"""The ASGI app of :func:`loom_nb.http.thread_app`, on Starlette.

Each request runs in three steps: the agent's ``auth`` decides who asks (401 when it
refuses), the agent's own methods read or decide (so scoping, the lease and the
compare-and-set are the ones the notebook uses), and ``_json`` shapes the bounded answer.
Store calls block, so reads run on Starlette's thread pool; a decision's resumed run goes to
loom_nb's private loop, where a notebook's runs go.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

try:
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.exceptions import HTTPException
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route
except ImportError:  # pragma: no cover - exercised in a subprocess by the tests
    from loom_nb._errors import MissingExtra

    raise MissingExtra("starlette", "http", "loom_nb.http") from None

from loom_nb import _loop_thread
from loom_nb._agent import Agent, Decision
from loom_nb._ask import is_question
from loom_nb._errors import (
    CallAlreadyDecided,
    RunError,
    StoreError,
    ThreadBusy,
    ThreadNotFound,
    UserError,
)
from loom_nb._messages import Thread
from loom_nb._tools import Tool
from loom_nb.http import _json, _reads
from loom_nb.http._json import ApiError

log = logging.getLogger("loom_nb.http")

#: Sent with every answer: JSON is never sniffed as HTML (nor run, if it were), and is never
#: cached by a proxy.
HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
    "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
}


def build(agents: Sequence[Agent]) -> Starlette:
    by_name = _agents_by_name(agents)

    def agent_of(request: Request) -> Agent:
        name = request.path_params["name"]
        agent = by_name.get(name)
        if agent is None:
            raise ApiError(404, f"no agent named {name!r} here; this app serves {sorted(by_name)}")
        return agent

    def read(endpoint: _reads.Read) -> Callable[[Request], Awaitable[Response]]:
        """A read endpoint, as the Jupyter extension serves it too (``_reads``): the whole
        read (auth hook, store, JSON) runs on the thread pool, since each step may block."""

        async def answer(request: Request) -> Response:
            source = _AgentReads(agent_of(request), request)
            params = {k: v for k, v in request.path_params.items() if k != "name"}
            found = await run_in_threadpool(
                endpoint.answer, source, _api(request), request.query_params, **params
            )
            return _answer(found)

        return answer

    async def decide(request: Request) -> Response:
        body = await _json_body(request, "the decision")
        decision = _json.decision_request(body)
        return await carry_out(
            request,
            decision.call_id,
            decision.digest,
            Decision(decision.approve, decision.digest),
            {"approve": decision.approve},
            question=False,
        )

    async def answer(request: Request) -> Response:
        body = await _json_body(request, "the answer")
        given = _json.answer_request(body)
        return await carry_out(
            request,
            given.call_id,
            given.digest,
            given.answer,
            {"answer": given.answer},
            question=True,
        )

    async def carry_out(
        request: Request,
        call_id: str,
        digest: str,
        value: Decision | str,
        said: dict[str, Any],
        *,
        question: bool,
    ) -> Response:
        """Decide (or answer) one pending call by compare-and-set, bound to the digest that
        was shown, and answer with the thread from the first message the run after it added."""
        agent = agent_of(request)
        source = _AgentReads(agent, request)
        thread = await run_in_threadpool(source.thread, request.path_params["thread_id"])
        context = source.signed_in()
        pending = next((p for p in thread.pending if p.call_id == call_id), None)
        if pending is None:
            if any(c.id == call_id for m in thread.messages for c in m.tool_calls):
                return _already(CallAlreadyDecided(call_id, "done"))
            raise ApiError(404, f"no pending call {call_id!r} in this thread")
        if is_question(pending) != question:
            where = "answers" if is_question(pending) else "decisions"
            raise ApiError(
                400,
                f"call {call_id!r} is {'a question' if is_question(pending) else 'not a question'}"
                f" ({pending.tool}): send it to .../threads/{thread.id}/{where}",
            )
        if pending.digest != digest:
            raise ApiError(
                409,
                f"the arguments of call {call_id!r} are not the ones that were shown "
                "(its digest differs); nothing was run. Load the thread again before deciding",
            )
        before = len(thread.messages)
        resumed = agent.resume(thread.id, {call_id: value}, context=context)
        error: str | None = None
        try:
            result = await asyncio.wrap_future(_loop_thread.submit(resumed))
        except ThreadNotFound:
            raise _json.not_found(agent.name) from None
        except CallAlreadyDecided as exc:
            return _already(exc)
        except ThreadBusy as exc:
            raise ApiError(409, str(exc), busy=True) from None
        except RunError as exc:  # the decision holds; the run after it failed
            if exc.result is None:
                raise
            result, error = exc.result, str(exc)
        shown = await run_in_threadpool(
            _json.thread_json,
            result.thread,
            agent.tools,
            cursor=before,
            limit=_json.MAX_MESSAGES,
            results_url=_reads.results_url(_api(request), agent.name, thread.id),
        )
        return _answer(
            {
                "schema": _json.SCHEMA,
                "call_id": call_id,
                **said,
                "status": result.status,
                "error": error,
                "thread": shown,
            }
        )

    routes = [
        *(Route(f"/api/{r.path}", _guarded(read(r)), methods=["GET"]) for r in _reads.READS),
        Route(
            "/api/agents/{name}/threads/{thread_id}/decisions",
            _guarded(decide),
            methods=["POST"],
        ),
        Route(
            "/api/agents/{name}/threads/{thread_id}/answers",
            _guarded(answer),
            methods=["POST"],
        ),
    ]
    return Starlette(
        routes=routes,
        exception_handlers={HTTPException: _http_error},  # type: ignore[dict-item]
    )


def _agents_by_name(agents: Sequence[Agent]) -> dict[str, Agent]:
    if isinstance(agents, Agent) or not isinstance(agents, Sequence) or not agents:
        raise UserError("thread_app takes a list of agents: thread_app([agent, ...])")
    by_name: dict[str, Agent] = {}
    for agent in agents:
        if not isinstance(agent, Agent):
            raise UserError(
                f"thread_app takes agents made with define_agent, not {type(agent).__name__}"
            )
        if agent.name in by_name and by_name[agent.name] is not agent:
            raise UserError(f"two agents are named {agent.name!r}: the URL names one agent")
        by_name[agent.name] = agent
    return by_name


class _AgentReads:
    """An agent's threads as a request's user reads them (a ``_reads.Source``): its ``auth``
    names the user first (401 when it names none or raises). Its methods block."""

    def __init__(self, agent: Agent, request: Request) -> None:
        self.agent = agent
        self.request = request
        self._context: Mapping[str, Any] | None = None

    @property
    def name(self) -> str:
        return self.agent.name

    @property
    def tools(self) -> Mapping[str, Tool]:
        return self.agent.tools

    def signed_in(self) -> Mapping[str, Any]:
        """The context the agent's methods get: ``{"request": request}``, once its ``auth``
        has named a user for it."""
        if self._context is not None:
            return self._context
        context = {"request": self.request}
        agent = self.agent
        if agent.auth is not None:
            try:
                user = agent.auth(context)
            except Exception:
                log.warning("auth of agent %r refused a request", agent.name, exc_info=True)
                user = None
            if not user:
                raise ApiError(
                    401, "not signed in: this agent's auth hook named no user for the request"
                )
        self._context = context
        return context

    def thread(self, thread_id: str) -> Thread:
        """The thread, or the one 404 for missing, another user's, and (without auth) any id
        that is not an exact 128-bit one."""
        context = self.signed_in()
        agent = self.agent
        if len(thread_id) > _json.ID_CHARS or (
            agent.auth is None and not _json.is_thread_id_128(thread_id)
        ):
            raise _json.not_found(agent.name)
        try:
            return agent.thread(thread_id, context=context)
        except ThreadNotFound:
            raise _json.not_found(agent.name) from None

    def threads(self, text: str | None, limit: int, cursor: int) -> dict[str, Any]:
        context = self.signed_in()
        agent = self.agent
        if agent.auth is None:
            raise ApiError(
                403,
                f"agent {agent.name!r} has no auth hook, so its threads are private by their "
                "ids and are never listed; define it with auth=... to list a user's threads",
            )
        return _json.threads_page(
            lambda limit, offset: agent.threads(context=context, limit=limit, offset=offset),
            lambda text, limit: agent.search(text, context=context, limit=limit),
            text,
            limit,
            cursor,
        )


def _api(request: Request) -> str:
    """The URL the API is under, with the path the app is mounted at (ASGI's root path)."""
    return f"{request.scope.get('root_path', '')}/api/"


async def _body(request: Request) -> bytes:
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > _json.BODY_BYTES:
            raise ApiError(413, f"the request body is larger than {_json.BODY_BYTES} bytes")
    return bytes(body)


async def _json_body(request: Request, what: str) -> bytes:
    """A POST's body, once its type says JSON: a form a cross-site page posts cannot set this
    type without CORS's preflight."""
    _json.check_unknown(request.query_params, set())
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        raise ApiError(415, f"send {what} as JSON (Content-Type: application/json)")
    return await _body(request)


def _guarded(
    endpoint: Callable[[Request], Awaitable[Response]],
) -> Callable[[Request], Awaitable[Response]]:
    """Every failure as a JSON answer: an ApiError as it says; a store that failed, 503."""

    async def guarded(request: Request) -> Response:
        try:
            return await endpoint(request)
        except ApiError as exc:
            return _answer(exc.body(), exc.status)
        except StoreError:
            log.exception("the thread store failed")
            return _answer({"error": "the thread store could not be reached; try again"}, 503)
        except UserError as exc:
            return _answer({"error": str(exc)}, 400)

    return guarded


def _already(exc: CallAlreadyDecided) -> Response:
    return _answer({"error": str(exc), "call_id": exc.call_id, "state": exc.state}, 409)


async def _http_error(request: Request, exc: HTTPException) -> Response:
    """Starlette's own refusals (no such route, a method it does not take) as JSON too."""
    words = {404: "no such endpoint", 405: "this endpoint does not take that method"}
    return _answer({"error": words.get(exc.status_code, str(exc.detail))}, exc.status_code)


def _answer(body: Mapping[str, Any], status: int = 200) -> Response:
    return JSONResponse(body, status_code=status, headers=HEADERS)
