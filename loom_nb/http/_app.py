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
from loom_nb.http import _json
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

    async def load(request: Request) -> Response:
        agent = agent_of(request)
        query = request.query_params
        _json.check_unknown(query, {"threadId", "cursor", "limit"})
        thread_id = _json.text_param(query, "threadId", required=True, limit=_json.ID_CHARS)
        assert thread_id is not None
        cursor = _json.cursor_param(query)
        limit = _json.int_param(query, "limit", _json.MESSAGES, _json.MAX_MESSAGES)
        context = await _signed_in(agent, request)
        thread = await _thread(agent, thread_id, context)
        results = f"{request.url.path}/threads/{thread.id}/results/"
        answer = await run_in_threadpool(
            _json.thread_json,
            thread,
            agent.tools,
            cursor=cursor,
            limit=limit,
            results_url=results,
        )
        return _answer(answer)

    async def threads(request: Request) -> Response:
        agent = agent_of(request)
        query = request.query_params
        _json.check_unknown(query, {"q", "limit", "cursor"})
        text = _json.text_param(query, "q", required=False, limit=_json.QUERY_CHARS)
        limit = _json.int_param(query, "limit", _json.THREADS, _json.MAX_THREADS)
        cursor = _json.cursor_param(query, _json.SEARCH_DEPTH if text else None)
        context = await _signed_in(agent, request)
        if agent.auth is None:
            raise ApiError(
                403,
                f"agent {agent.name!r} has no auth hook, so its threads are private by their "
                "ids and are never listed; define it with auth=... to list a user's threads",
            )
        answer = await run_in_threadpool(
            _json.threads_page,
            lambda limit, offset: agent.threads(context=context, limit=limit, offset=offset),
            lambda text, limit: agent.search(text, context=context, limit=limit),
            text,
            limit,
            cursor,
        )
        return _answer(answer)

    async def results(request: Request) -> Response:
        agent = agent_of(request)
        query = request.query_params
        _json.check_unknown(query, {"cursor", "limit"})
        cursor = _json.cursor_param(query)
        limit = _json.int_param(query, "limit", _json.MAX_ROWS, _json.MAX_ROWS)
        context = await _signed_in(agent, request)
        thread = await _thread(agent, request.path_params["thread_id"], context)
        call_id = request.path_params["call_id"]
        found = next((r for r in thread.tool_results() if r.call_id == call_id), None)
        if found is None:
            raise ApiError(404, f"no result of call {call_id!r} in this thread")

        def page() -> dict[str, Any]:
            from loom_nb._codec import is_dataframe

            if not is_dataframe(found.data):
                raise ApiError(404, f"the result of call {call_id!r} holds no table")
            return _json.frame_page_json(found.data, cursor, limit)

        return _answer(await run_in_threadpool(page))

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
        context = await _signed_in(agent, request)
        thread = await _thread(agent, request.path_params["thread_id"], context)
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
            results_url=f"/api/agents/{agent.name}/threads/{thread.id}/results/",
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
        Route("/api/agents/{name}", _guarded(load), methods=["GET"]),
        Route("/api/agents/{name}/threads", _guarded(threads), methods=["GET"]),
        Route(
            "/api/agents/{name}/threads/{thread_id}/results/{call_id}",
            _guarded(results),
            methods=["GET"],
        ),
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


async def _signed_in(agent: Agent, request: Request) -> Mapping[str, Any]:
    """The context the agent's methods get: ``{"request": request}``, once its ``auth`` has
    named a user for it (401 when it names none or raises)."""
    context = {"request": request}
    if agent.auth is None:
        return context
    try:
        user = await run_in_threadpool(agent.auth, context)
    except Exception:
        log.warning("auth of agent %r refused a request", agent.name, exc_info=True)
        user = None
    if not user:
        raise ApiError(401, "not signed in: this agent's auth hook named no user for the request")
    return context


async def _thread(agent: Agent, thread_id: str, context: Mapping[str, Any]) -> Any:
    """The thread, or the one 404 for missing, another user's, and (without auth) any id
    that is not an exact 128-bit one."""
    if len(thread_id) > _json.ID_CHARS or (
        agent.auth is None and not _json.is_thread_id_128(thread_id)
    ):
        raise _json.not_found(agent.name)
    try:
        return await run_in_threadpool(agent.thread, thread_id, context=context)
    except ThreadNotFound:
        raise _json.not_found(agent.name) from None


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
