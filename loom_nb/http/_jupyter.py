"""The Jupyter server extension: the thread API's read endpoints and a thread browser page,
under the server's base URL, from the store ``LOOM_STORE`` names (or the default).

Jupyter's own authentication decides who may call (token, password, JupyterHub's OAuth);
the authenticated user's name is the ``user_id`` threads are scoped to, so agents whose
``auth`` returns that name (on JupyterHub, ``os.environ["JUPYTERHUB_USER"]``) show their
threads here. A thread made without ``auth`` (``user_id`` None) opens by its exact 128-bit id,
which is the link a colleague is sent; it is never listed.

Routes (``BASE`` is the server's base URL):

- ``BASE/loom/threads?q=``: the thread browser (the user's threads, newest first, searched);
- ``BASE/loom/threads/<agent>/<id>``: one thread, as the notebook's static HTML draws it;
- ``BASE/loom/api/agents/<agent>?threadId=``, ``BASE/loom/api/agents/<agent>/threads`` and
  ``BASE/loom/api/agents/<agent>/threads/<id>/results/<call_id>``: the JSON of
  :mod:`loom_nb.http`, answered by the same code (``_reads``), so a frame's ``next`` links
  page it whole under ``BASE``; any other path under ``BASE/loom/api`` answers a JSON error.

The server has no agent (its model and tools live in notebooks), so nothing here runs a call:
decisions stay with the notebook's cards and :func:`loom_nb.http.thread_app`. Every method
but GET is refused by Jupyter (its XSRF check first, for a browser's cookie).
"""

from __future__ import annotations

import json
import logging
from http.client import responses
from typing import Any

import tornado.web
from jupyter_server.base.handlers import APIHandler, JupyterHandler
from jupyter_server.utils import url_path_join

from loom_nb._errors import StoreError, UserError
from loom_nb._lease import settle
from loom_nb._messages import Thread
from loom_nb._store import Store, store_from_env
from loom_nb.http import _json, _page, _reads
from loom_nb.http._json import ApiError

log = logging.getLogger("loom_nb.http")


class _Reads:
    """What every handler reads through: the server's store, opened on first use (a store
    that cannot be opened is said in each answer, and the server goes on)."""

    def __init__(self) -> None:
        self._store: Store | None = None

    @property
    def store(self) -> Store:
        if self._store is None:
            try:
                self._store = store_from_env()
            except UserError as exc:
                raise ApiError(503, f"loom_nb cannot open its thread store: {exc}") from None
        return self._store

    def thread(self, agent: str, thread_id: str, user: str) -> Thread:
        """The user's thread, or one made without auth by its exact id; else the one 404."""
        if len(thread_id) > _json.ID_CHARS:
            raise _json.not_found(agent)
        thread = self.store.load(thread_id, user_id=user)
        if thread is None and _json.is_thread_id_128(thread_id):
            thread = self.store.load(thread_id, user_id=None)
        if thread is None or thread.agent != agent:
            raise _json.not_found(agent)
        return settle(thread)

    def source(self, agent: str, user: str) -> _StoreSource:
        return _StoreSource(self, agent, user)

    def threads(
        self, user: str, text: str | None, limit: int, cursor: int, agent: str | None = None
    ) -> dict[str, Any]:
        """A page of the user's threads (of ``agent``, or of every agent)."""
        store = self.store
        return _json.threads_page(
            lambda n, offset: store.list(agent=agent, user_id=user, limit=n, offset=offset),
            lambda text, n: store.search(text, agent=agent, user_id=user, limit=n),
            text,
            limit,
            cursor,
        )


class _StoreSource:
    """One agent's threads in the server's store, as the Jupyter user reads them (a
    ``_reads.Source``). The server defines no agent, so calls are not put in words."""

    tools = None

    def __init__(self, reads: _Reads, name: str, user: str) -> None:
        self.reads, self.name, self.user = reads, name, user

    def thread(self, thread_id: str) -> Thread:
        return self.reads.thread(self.name, thread_id, self.user)

    def threads(self, text: str | None, limit: int, cursor: int) -> dict[str, Any]:
        return self.reads.threads(self.user, text, limit, cursor, self.name)


class _Base(JupyterHandler):  # type: ignore[misc]
    def initialize(self, reads: _Reads) -> None:
        self.reads = reads

    @property
    def user_name(self) -> str:
        return str(self.current_user.username)

    def query(self) -> dict[str, str]:
        """The request's query, without Jupyter's own ``?token=`` (its login)."""
        args = self.request.query_arguments
        return {k: self.get_query_argument(k) for k in args if k != "token"}

    def answer(self, body: dict[str, Any], status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.set_header("Cache-Control", "no-store")
        self.finish(json.dumps(body, ensure_ascii=False))

    def guarded(self, read: Any) -> Any:
        try:
            return read()
        except ApiError as exc:
            self.answer(exc.body(), exc.status)
        except StoreError:
            log.exception("the thread store failed")
            self.answer({"error": "the thread store could not be reached; try again"}, 503)
        except UserError as exc:
            self.answer({"error": str(exc)}, 400)
        return None


class _Api(_Base, APIHandler):  # type: ignore[misc]
    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """Jupyter's own refusals (a method not taken, an XSRF check) in the API's
        ``{"error": ...}`` form."""
        exc = kwargs.get("exc_info", (None, None, None))[1]
        if status_code == 405:
            message = (
                "this endpoint does not take that method: the Jupyter server only reads "
                "threads; decide a call in its notebook or through loom_nb.http.thread_app"
            )
        elif isinstance(exc, tornado.web.HTTPError) and exc.log_message:
            message = exc.log_message % exc.args if exc.args else exc.log_message
        else:
            message = responses.get(status_code, "error")
        self.answer({"error": message}, status_code)


class ReadHandler(_Api):
    """One of the thread API's read endpoints (``_reads.READS``), answered as the ASGI app
    answers it, with links under this server's base URL."""

    def initialize(self, reads: _Reads, read: _reads.Read) -> None:  # type: ignore[override]
        super().initialize(reads)
        self.read = read

    @tornado.web.authenticated
    def get(self, name: str, **params: str) -> None:
        api = url_path_join(self.base_url, "loom/api/")
        source = self.reads.source(name, self.user_name)
        answer = self.guarded(lambda: self.read.answer(source, api, self.query(), **params))
        if answer is not None:
            self.answer(answer)


class NoEndpointHandler(_Api):
    """Any other path under ``loom/api``: a JSON 404, not Jupyter's HTML page."""

    @tornado.web.authenticated
    def get(self, path: str | None) -> None:
        self.answer({"error": "no such endpoint"}, 404)


class BrowserHandler(_Base):
    """The thread browser: the user's threads of every agent, newest first, searched."""

    @property
    def content_security_policy(self) -> str:
        # The pages have no script; should text ever slip past the renderer, none would run.
        return (
            "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
            "form-action 'self'; frame-ancestors 'self'; base-uri 'none'"
        )

    @tornado.web.authenticated
    def get(self) -> None:
        def read() -> str:
            query = self.query()
            _json.check_unknown(query, {"q", "cursor"})
            text = _json.text_param(query, "q", required=False, limit=_json.QUERY_CHARS)
            cursor = _json.cursor_param(query, _json.SEARCH_DEPTH if text else None)
            page = self.reads.threads(self.user_name, text, _json.THREADS, cursor)
            return _page.list_page(self.base_url, self.user_name, text, page)

        self._html(read)

    def _html(self, read: Any) -> None:
        try:
            body = read()
        except ApiError as exc:
            self.set_status(exc.status)
            body = _page.error_page(self.base_url, exc.message)
        except StoreError:
            log.exception("the thread store failed")
            self.set_status(503)
            body = _page.error_page(self.base_url, "the thread store could not be reached")
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.finish(body)


class ThreadPageHandler(BrowserHandler):
    """One thread, drawn as the notebook's static HTML, with its link."""

    @tornado.web.authenticated
    def get(self, agent: str, thread_id: str) -> None:  # type: ignore[override]
        def read() -> str:
            _json.check_unknown(self.query(), set())
            thread = self.reads.thread(agent, thread_id, self.user_name)
            link = self.request.full_url().split("?")[0]
            return _page.thread_page(self.base_url, thread, link)

        self._html(read)


def _load_jupyter_server_extension(serverapp: Any) -> None:
    web_app = serverapp.web_app
    base = web_app.settings["base_url"]
    reads = _Reads()
    given = {"reads": reads}
    name = r"([^/]+)"
    api = [
        (url_path_join(base, "loom/api", r.pattern()), ReadHandler, {**given, "read": r})
        for r in _reads.READS
    ]
    web_app.add_handlers(
        ".*$",
        [
            (url_path_join(base, "loom/threads"), BrowserHandler, given),
            (url_path_join(base, f"loom/threads/{name}/{name}"), ThreadPageHandler, given),
            *api,
            (url_path_join(base, "loom/api(/.*)?"), NoEndpointHandler, given),
        ],
    )
    serverapp.log.info("loom_nb: the thread browser is at %sloom/threads", base)
