"""Threads over HTTP: the seed's ``GET /api/agents/<name>?threadId=<id>``, for agents defined
in a Python process. Needs ``pip install "loom-nb[http]"``.

.. code-block:: python

    from loom_nb.http import thread_app

    app = thread_app([agent])          # serve it: uvicorn mymodule:app

Endpoints (every answer is JSON, bounded and paged; its shape is ``thread.schema.json``):

- ``GET /api/agents/<name>?threadId=<id>&cursor=&limit=``: a saved thread, a page of its
  messages at a time (tool calls with their arguments and in words, results with frames as
  tables keeping their dtypes), its pending calls and their state, its usage;
- ``GET /api/agents/<name>/threads?q=&limit=&cursor=``: the user's threads, newest first,
  searched with ``q`` (only for an agent with ``auth``);
- ``GET /api/agents/<name>/threads/<id>/results/<call_id>?cursor=&limit=``: a frame's rows
  beyond those the thread page holds;
- ``POST /api/agents/<name>/threads/<id>/decisions`` with ``{"call_id", "approve",
  "digest"}``: approve or reject a pending call, compare-and-set as the notebook's buttons
  are (409 when it was decided elsewhere first); an approved call runs here, once.

Each request calls the agent's ``auth(context)`` with ``context = {"request": request}``, a
Starlette ``Request`` (headers, cookies, ``request.scope``), once or more per request; a hook
that returns no user (or raises) gets 401. Another user's thread answers 404, byte for byte as
a missing one does. Without ``auth`` only an exact 128-bit thread id reads a thread, and no
endpoint lists threads.

The same read endpoints and a thread browser page are served inside a Jupyter server by the
extension this package registers (``loom_nb.http._jupyter``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from loom_nb import _public

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from loom_nb._agent import Agent

__all__ = ["thread_app"]


def thread_app(agents: Sequence[Agent]) -> Starlette:
    """An ASGI app serving the saved threads of ``agents`` (see this module's docs)."""
    from loom_nb.http._app import build

    return build(agents)


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    """Jupyter server's entry: the thread browser and read endpoints under ``/loom/``."""
    return [{"module": "loom_nb.http._jupyter"}]


_public.publish(__name__, [thread_app])
