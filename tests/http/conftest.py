"""A real ASGI server (uvicorn, on loopback) serving the test agents, on every store."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loom_nb import Agent, Store
from tests.http import agents
from tests.postgres_server import free_port
from tests.stores.conftest import _POSTGRES, Backend, _open_backend

SCHEMA = json.loads(
    (Path(__file__).parents[2] / "loom_nb" / "http" / "thread.schema.json").read_text()
)


class Served:
    """An app on a real uvicorn server in this process, with its agents and store."""

    def __init__(self, store: Store, backend: Backend, writes: Path) -> None:
        import httpx
        import uvicorn

        from loom_nb.http import thread_app

        self.store, self.backend, self.writes = store, backend, writes
        self.notes, self.team = agents.make(store, str(writes))
        self.port = free_port()
        config = uvicorn.Config(
            thread_app([self.notes, self.team]),
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            lifespan="off",
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{self.port}"
        self.http = httpx.Client(base_url=self.url, timeout=60)

    def get(self, path: str, user: str | None = None, **params: Any) -> Any:
        headers = {"X-User": user} if user else {}
        return self.http.get(path, params=params, headers=headers)

    def decide(self, agent: Agent, thread_id: str, body: Any, user: str | None = None) -> Any:
        headers = {"X-User": user} if user else {}
        return self.http.post(
            f"/api/agents/{agent.name}/threads/{thread_id}/decisions", json=body, headers=headers
        )

    def executions(self) -> list[str]:
        return self.writes.read_text().splitlines() if self.writes.exists() else []

    def close(self) -> None:
        self.http.close()
        self.server.should_exit = True
        self.thread.join(10)


def _served(request: pytest.FixtureRequest, folder: Path) -> Iterator[Served]:
    backend = _open_backend(request.param, request, folder)
    store = backend.open()
    app = Served(store, backend, folder / "writes.txt")
    yield app
    app.close()
    store.close()


@pytest.fixture(params=["memory", "sqlite", _POSTGRES])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Served]:
    """The app over each store."""
    yield from _served(request, tmp_path)


@pytest.fixture(params=["sqlite", _POSTGRES])
def shared_served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Served]:
    """The app over each store that other processes open too."""
    yield from _served(request, tmp_path)


def validate(answer: Any, definition: str) -> None:
    """``answer`` keeps the schema's ``definition``."""
    import jsonschema

    schema = {**SCHEMA, "$ref": f"#/$defs/{definition}"}
    jsonschema.validate(answer, schema, cls=jsonschema.Draft202012Validator)


def rebuilt(table: dict[str, Any]) -> Any:
    """A frame from its JSON table, with the dtypes the table names (what a reader does)."""
    import pandas as pd

    names = [c["name"] for c in table["columns"]]
    frame = pd.DataFrame(table["rows"], columns=names, dtype=object)
    for column in table["columns"]:
        name, dtype = column["name"], column["dtype"]
        values = frame[name]
        if dtype.startswith("datetime64"):
            frame[name] = pd.to_datetime(values).astype(dtype)
        elif dtype.startswith("timedelta64"):
            frame[name] = pd.to_timedelta(values).astype(dtype)
        elif dtype == "category":
            frame[name] = values.astype("category")
        elif dtype == "object":
            kind = column.get("values")
            if kind == "date":
                frame[name] = [None if v is None else dt.date.fromisoformat(v) for v in values]
            elif kind == "decimal":
                frame[name] = [None if v is None else decimal.Decimal(v) for v in values]
        else:
            frame[name] = values.astype(dtype)
    frame.index = pd.RangeIndex(table["offset"], table["offset"] + len(frame))
    return frame
