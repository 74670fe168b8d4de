"""Threads over HTTP: loading a 5,000-message thread from ``loom_nb.http`` (a real uvicorn
server on loopback, httpx as the client) vs reading the same SQLite store directly, in the
same run.

The thread is ``bench_store``'s: user and assistant text of about 300 characters, every fifth
message a tool result holding a 50-row DataFrame. Medians of the loads:

- ``store.load`` (typed messages, frames left encoded) and ``agent.thread(id).frames`` (every
  frame decoded): what a kernel does;
- over HTTP, the first page (100 messages: what a browser shows first) and the whole thread
  (every page of 500 messages, JSON parsed by the client, frames as JSON tables).

Run: ``python -m bench.bench_http [--messages N] [--repeat R]``.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.bench_store import conversation, median_ms


def serve(app: Any) -> tuple[Any, str]:
    import uvicorn

    from tests.postgres_server import free_port

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.02)
    return server, f"http://127.0.0.1:{port}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=5_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()

    import httpx

    from loom_nb import ReplayModel, Thread, define_agent
    from loom_nb._messages import new_thread_id
    from loom_nb.http import thread_app
    from loom_nb.sqlite import sqlite_store

    with tempfile.TemporaryDirectory() as folder:
        store = sqlite_store(Path(folder) / "loom.db")
        agent = define_agent(name="bench", model=ReplayModel([]), store=store)
        thread = Thread(id=new_thread_id(), agent="bench", title="bench")
        store.save_thread(thread)
        for message in conversation(args.messages):
            thread.messages.append(message)
            store.append(thread, message)
        server, url = serve(thread_app([agent]))
        client = httpx.Client(base_url=url, timeout=120)

        def page(cursor: str | None, limit: int) -> Any:
            params = {
                "threadId": thread.id,
                "limit": limit,
                **({"cursor": cursor} if cursor else {}),
            }
            answer = client.get("/api/agents/bench", params=params)
            answer.raise_for_status()
            return answer.json()

        def whole() -> int:
            got, cursor = 0, None
            while True:
                body = page(cursor, 500)
                got += len(body["messages"])
                cursor = body["page"]["next_cursor"]
                if cursor is None:
                    return got

        assert whole() == args.messages
        rows = [
            ("store.load (frames left encoded)", lambda: store.load(thread.id)),
            (
                "agent.thread(id).frames (every frame decoded)",
                lambda: agent.thread(thread.id).frames,
            ),
            ("HTTP: first page (100 messages)", lambda: page(None, 100)),
            ("HTTP: whole thread (pages of 500)", whole),
        ]
        results = [(name, median_ms(fn, args.repeat)) for name, fn in rows]
        direct = results[1][1]
        print(f"{args.messages} messages, median of {args.repeat} loads each")
        print(f"{'load':<50} {'ms':>9} {'vs agent.thread':>16}")
        for name, ms in results:
            print(f"{name:<50} {ms:9.1f} {ms / direct:15.2f}x")
        client.close()
        server.should_exit = True
        store.close()


if __name__ == "__main__":
    main()
