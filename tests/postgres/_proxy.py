"""A TCP proxy between a kernel and PostgreSQL that can go silent, as a dropped VPN, an
expired NAT entry or a hung pooler does: the sockets stay open, nothing more is forwarded in
either direction, nothing is closed (until ``close_all()``, which stands for the server
finally noticing)."""

from __future__ import annotations

import contextlib
import select
import socket
import threading


class SilentProxy:
    def __init__(self, port: int) -> None:
        self.target = ("127.0.0.1", port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.silent = threading.Event()
        #: Set once, silent, it holds something the kernel sent (a call waits on the server).
        self.holding = threading.Event()
        #: Go silent when the kernel sends a chunk containing this (it is not forwarded).
        self.silent_on: bytes | None = None
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            with self._lock:
                self._sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()

    def _pump(self, client: socket.socket, server: socket.socket) -> None:
        ends = {client: server, server: client}
        while True:
            try:
                ready, _, _ = select.select(list(ends), [], [], 0.05)
            except (OSError, ValueError):
                return
            if self.silent.is_set():
                if client in ready:
                    self.holding.set()
                continue  # hold everything: read nothing, send nothing
            for sock in ready:
                try:
                    data = sock.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                trigger = self.silent_on
                if sock is client and trigger is not None and trigger in data:
                    self.silent.set()
                    break
                with contextlib.suppress(OSError):
                    ends[sock].sendall(data)

    def close_all(self) -> None:
        """The server notices at last: every forwarded connection is closed."""
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.close()
            self._sockets.clear()

    def close(self) -> None:
        self.listener.close()
        self.close_all()
