"""The processes the MCP tests start: the server of ``_served`` and the ones that decide."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import ClientSession, types
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[2]
SERVED = "tests.mcp._served:server"


def environment(db: Path, ledger: Path) -> dict[str, str]:
    return {
        "PYTHONPATH": str(ROOT),
        "LOOM_TEST_DB": str(db),
        "LOOM_TEST_LEDGER": str(ledger),
    }


@asynccontextmanager
async def stdio_session(
    env: dict[str, str], elicitation_callback: Any = None, client_name: str | None = None
) -> AsyncIterator[ClientSession]:
    """The SDK's client, on ``python -m loom_nb.mcp`` started over stdio."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "loom_nb.mcp", SERVED], env=env, cwd=str(ROOT)
    )
    async with (
        stdio_client(params) as (read, write),
        ClientSession(
            read,
            write,
            elicitation_callback=elicitation_callback,
            client_info=types.Implementation(name=client_name, version="1")
            if client_name
            else None,
        ) as session,
    ):
        await session.initialize()
        yield session


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_http(env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    """``python -m loom_nb.mcp ... --http PORT``, once it accepts connections."""
    process = subprocess.Popen(
        [sys.executable, "-m", "loom_nb.mcp", SERVED, "--http", str(port)],
        env={**os.environ, **env},
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(process.stderr.read().decode() if process.stderr else "exited")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return process
        time.sleep(0.1)
    process.kill()
    raise RuntimeError("the HTTP server did not start")


@asynccontextmanager
async def http_session(port: int) -> AsyncIterator[ClientSession]:
    async with (
        streamable_http_client(f"http://127.0.0.1:{port}/mcp") as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()
        yield session


DECIDE = """
import sys
from loom_nb import CallAlreadyDecided
from tests.mcp._served import server
thread_id, call_id, approve = sys.argv[1], sys.argv[2], sys.argv[3] == "approve"
try:
    result = server.agent.resume_sync(thread_id, {call_id: approve})
    print("decided", result.status)
except CallAlreadyDecided:
    print("already decided")
"""


def decide(env: dict[str, str], thread_id: str, call_id: str, approve: bool = True) -> Any:
    """A process that imports the served module, as a notebook kernel does, and decides."""
    return subprocess.Popen(
        [sys.executable, "-c", DECIDE, thread_id, call_id, "approve" if approve else "reject"],
        env={**os.environ, **env},
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
