"""A scripted HTTP server on 127.0.0.1 for the model adapters' tests.

It answers each request with the next queued :class:`Reply`: a JSON body (errors, non-streamed
answers) or a server-sent-event stream sent with chunked transfer encoding, as the providers
do, and the faults a real network has: a stall, a stream that trickles forever, a cut or a
reset mid-stream, a body that is not what the API defines. Every request is recorded (method,
path, headers, JSON body) so tests can assert what the real SDK sent. A stream may ``hold`` the
connection open after its events, until the client goes away: that is how tests see that
cancelling a run closes the request.
"""

from __future__ import annotations

import json
import select
import socket
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: Models a test made with make_model(...); conftest closes them on the test's loop at the end.
OPENED: list[Any] = []

#: Upper bound for anything the server waits for; a test that needs it has already failed.
PATIENCE = 10.0


@dataclass
class Reply:
    """One scripted answer."""

    status: int = 200
    #: JSON body (for non-streamed answers and errors).
    body: Any = None
    #: Raw SSE blocks (``"data: {...}\\n\\n"``); when set, the answer is a stream.
    events: list[str] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    #: After the events, keep the stream open until the client disconnects.
    hold: bool = False
    #: Before answering, wait this long (to trigger client timeouts).
    stall: float = 0.0
    #: End the stream abruptly (no final chunk): a server that died mid-answer.
    cut: bool = False
    #: Close the connection at once, without answering.
    hang_up: bool = False
    #: End the stream with a TCP reset instead (a proxy or a server that crashed), once the
    #: client had a moment to read the events.
    reset: bool = False
    #: After the events, send this block every ``every`` seconds until the client goes away.
    trickle: str | None = None
    every: float = 0.05
    #: A body sent as is (e.g. a proxy's HTML login page), instead of ``body``'s JSON.
    raw: str | None = None
    #: Instead of ``application/json`` (answers) or ``text/event-stream`` (streams).
    content_type: str | None = None


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


def data(obj: Any) -> str:
    """An SSE block with only a data line (OpenAI's format)."""
    text = obj if isinstance(obj, str) else json.dumps(obj)
    return f"data: {text}\n\n"


def event(name: str, obj: Any) -> str:
    """An SSE block with an event name (Anthropic's format)."""
    return f"event: {name}\ndata: {json.dumps(obj)}\n\n"


# ---- OpenAI's Chat Completions stream (also scripted by tests/test_notebooks.py) -----------


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "gpt-test",
        "system_fingerprint": "fp_test",
        "choices": [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish}],
    }


def usage_chunk(prompt: int, completion: int) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "gpt-test",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


def stream(
    *deltas: dict[str, Any], finish: str = "stop", usage: tuple[int, int] = (10, 5), **reply: Any
) -> Reply:
    events = [data(chunk({"role": "assistant", "content": ""}))]
    events += [data(chunk(d)) for d in deltas]
    events.append(data(chunk(finish=finish)))
    events.append(data(usage_chunk(*usage)))
    events.append(data("[DONE]"))
    return Reply(events=events, **reply)


def text(*pieces: str, usage: tuple[int, int] = (10, 5)) -> Reply:
    return stream(*({"content": p} for p in pieces), usage=usage)


def call_start(index: int, call_id: str, name: str) -> dict[str, Any]:
    return {
        "tool_calls": [
            {
                "index": index,
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": ""},
            }
        ]
    }


def call_args(index: int, piece: str) -> dict[str, Any]:
    return {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}


class WireServer:
    """``server.add(Reply(...))``, point an SDK at ``server.url``, then read ``server.requests``."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.requests: list[Recorded] = []
        #: Set when a held stream saw its client go away.
        self.disconnected = threading.Event()
        #: Set when a held stream has sent its events.
        self.holding = threading.Event()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def add(self, *replies: Reply) -> None:
        with self._lock:
            self.replies.extend(replies)

    def next_reply(self) -> Reply:
        with self._lock:
            if self.replies:
                return self.replies.pop(0)
        return Reply(
            500,
            {
                "error": {
                    "message": "the test server has no scripted reply left",
                    "type": "test_error",
                }
            },
            headers={"x-should-retry": "false"},
        )

    def record(self, request: Recorded) -> None:
        with self._lock:
            self.requests.append(request)

    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests]

    def close(self) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(PATIENCE)


def _handler(server: WireServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self._answer()

        def _answer(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", "replace")
            server.record(
                Recorded(
                    self.command,
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                )
            )
            reply = server.next_reply()
            if reply.stall and server._stop.wait(reply.stall):
                return
            if reply.hang_up:
                self.close_connection = True
                return
            if reply.events is None:
                self._json(reply)
            else:
                self._stream(reply)

        def _json(self, reply: Reply) -> None:
            text = reply.raw if reply.raw is not None else json.dumps(reply.body)
            payload = text.encode()
            self.send_response(reply.status)
            self.send_header("content-type", reply.content_type or "application/json")
            self.send_header("content-length", str(len(payload)))
            for k, v in reply.headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()

        def _stream(self, reply: Reply) -> None:
            self.send_response(reply.status)
            self.send_header(
                "content-type", reply.content_type or "text/event-stream; charset=utf-8"
            )
            self.send_header("cache-control", "no-cache")
            self.send_header("transfer-encoding", "chunked")
            for k, v in reply.headers.items():
                self.send_header(k, v)
            self.end_headers()
            try:
                for block in reply.events or []:
                    self._chunk(block)
                if reply.trickle is not None:
                    deadline = time.monotonic() + PATIENCE
                    while time.monotonic() < deadline and not server._stop.wait(reply.every):
                        self._chunk(reply.trickle)
                if reply.reset:  # SO_LINGER 0: closing sends RST, not FIN
                    # A reset discards what the client has not read yet: let it read first.
                    server._stop.wait(0.2)
                    self.connection.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                    )
                    self.connection.close()
                    self.close_connection = True
                    return
                if reply.cut:
                    self.close_connection = True
                    return
                if reply.hold:
                    server.holding.set()
                    self._wait_for_disconnect()
                    self.close_connection = True
                    return
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                server.disconnected.set()
                self.close_connection = True

        def _chunk(self, block: str) -> None:
            data = block.encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _wait_for_disconnect(self) -> None:
            sock: socket.socket = self.connection
            deadline = time.monotonic() + PATIENCE
            while time.monotonic() < deadline and not server._stop.is_set():
                readable, _, _ = select.select([sock], [], [], 0.02)
                if readable:
                    try:
                        if not sock.recv(1, socket.MSG_PEEK):
                            server.disconnected.set()
                            return
                    except OSError:
                        server.disconnected.set()
                        return

    return Handler


def closed_port_url() -> str:
    """A loopback URL where nothing listens (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@contextmanager
def unanswered_connects() -> Iterator[str]:
    """A loopback URL where connecting hangs: the listener never accepts and its backlog is
    full, so the kernel drops further connection requests."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    try:
        for _ in range(4):
            filler = socket.socket()
            filler.setblocking(False)
            with suppress(BlockingIOError):
                filler.connect(("127.0.0.1", port))
            fillers.append(filler)
        time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


def allow_network(monkeypatch: Any) -> None:
    """For live tests only: undo the suite's loopback-only guard for this test."""
    guard = socket.socket.connect
    real = getattr(guard, "__globals__", {}).get("_real_connect")
    if real is not None:
        monkeypatch.setattr(socket.socket, "connect", real)
