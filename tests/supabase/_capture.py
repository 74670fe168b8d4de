"""A PostgREST stand-in on 127.0.0.1 that records every request and answers from a script.

The real supabase-py clients (sync and async) talk to it over real HTTP, so the tests see
exactly what would leave the notebook: method, path, query string, headers and body.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit


@dataclass
class Request:
    method: str
    path: str
    #: The raw query string, as sent.
    query: str
    headers: dict[str, str]
    body: bytes

    @property
    def params(self) -> list[tuple[str, str]]:
        """The query as (name, value) pairs, decoded the way PostgREST decodes them."""
        return parse_qsl(self.query, keep_blank_values=True)

    def param(self, name: str) -> str | None:
        values = [v for k, v in self.params if k == name]
        assert len(values) <= 1, f"{name} sent {len(values)} times: {self.query}"
        return values[0] if values else None

    @property
    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@dataclass
class Reply:
    status: int = 200
    body: Any = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    #: Send these bytes as-is instead of JSON-encoding ``body``.
    raw: bytes | None = None


Responder = Callable[[Request], Reply]


class CaptureServer:
    """``with CaptureServer() as server: ... server.url ... server.requests``."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.replies: list[Reply] = []
        self.responder: Responder | None = None
        self._lock = threading.Lock()
        capture = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # headers and body go out in two writes: without this, Nagle's algorithm and the
            # client's delayed ACK hold every answer back about 40 ms
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                parts = urlsplit(self.path)
                request = Request(
                    self.command,
                    parts.path,
                    parts.query,
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                )
                reply = capture._record(request)
                payload = reply.raw if reply.raw is not None else json.dumps(reply.body).encode()
                self.send_response(reply.status)
                headers = {"Content-Type": "application/json; charset=utf-8", **reply.headers}
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    # the client may have given up already (a timeout test)
                    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                        self.wfile.write(payload)

            do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = do_HEAD = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def _record(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self.replies:
                return self.replies.pop(0)
        if self.responder is not None:
            return self.responder(request)
        return Reply()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def reply(self, *replies: Reply) -> None:
        """Queue replies for the next requests (then the responder, then ``[]``)."""
        with self._lock:
            self.replies.extend(replies)

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()
            self.replies.clear()

    def start(self) -> CaptureServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> CaptureServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def rows_reply(rows: list[dict[str, Any]], *, total: int | None = None, offset: int = 0) -> Reply:
    """A PostgREST answer to a GET: the rows, and Content-Range with the count when asked."""
    end = offset + len(rows) - 1
    span = f"{offset}-{end}" if rows else "*"
    return Reply(200, rows, {"Content-Range": f"{span}/{'*' if total is None else total}"})


def error_reply(
    status: int, code: str, message: str, *, hint: str | None = None, details: str | None = None
) -> Reply:
    """A PostgREST error body."""
    return Reply(status, {"code": code, "message": message, "hint": hint, "details": details})
