"""The thread API's read endpoints, written once for both faces: the ASGI app serves them over
its agents, the Jupyter server extension over its server's store and user. A face gives each
read a :class:`Source` (one agent's threads as the request's user may read them) and the URL
its API is under, so a thread, its frames' pages and their ``next`` links read the same from
either, under either's base URL.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote

from loom_nb._codec import is_dataframe
from loom_nb._messages import Thread
from loom_nb._tools import Tool
from loom_nb.http import _json
from loom_nb.http._json import ApiError


class Source(Protocol):
    """One agent's threads, as the user a request is from may read them."""

    @property
    def name(self) -> str: ...

    @property
    def tools(self) -> Mapping[str, Tool] | None:
        """The agent's tools, for calls in words (None where no agent is defined)."""

    def thread(self, thread_id: str) -> Thread:
        """The thread, or the one 404 (:func:`_json.not_found`) for missing and foreign."""

    def threads(self, text: str | None, limit: int, cursor: int) -> dict[str, Any]:
        """A page of the user's threads, searched with ``text`` (:func:`_json.threads_page`)."""


def results_url(api: str, agent: str, thread_id: str) -> str:
    """Where a thread's frames are paged; ``api`` is the URL the API is under (ends in /)."""
    return f"{api}agents/{quote(agent, safe='')}/threads/{quote(thread_id, safe='')}/results/"


def load(source: Source, api: str, query: Mapping[str, str]) -> dict[str, Any]:
    """``GET agents/<name>?threadId=&cursor=&limit=``: a page of a saved thread."""
    _json.check_unknown(query, {"threadId", "cursor", "limit"})
    thread_id = _json.text_param(query, "threadId", required=True, limit=_json.ID_CHARS)
    assert thread_id is not None
    cursor = _json.cursor_param(query)
    limit = _json.int_param(query, "limit", _json.MESSAGES, _json.MAX_MESSAGES)
    thread = source.thread(thread_id)
    return _json.thread_json(
        thread,
        source.tools,
        cursor=cursor,
        limit=limit,
        results_url=results_url(api, source.name, thread.id),
    )


def threads(source: Source, api: str, query: Mapping[str, str]) -> dict[str, Any]:
    """``GET agents/<name>/threads?q=&limit=&cursor=``: the user's threads, newest first."""
    _json.check_unknown(query, {"q", "limit", "cursor"})
    text = _json.text_param(query, "q", required=False, limit=_json.QUERY_CHARS)
    limit = _json.int_param(query, "limit", _json.THREADS, _json.MAX_THREADS)
    cursor = _json.cursor_param(query, _json.SEARCH_DEPTH if text else None)
    return source.threads(text, limit, cursor)


def results(
    source: Source, api: str, query: Mapping[str, str], *, thread_id: str, call_id: str
) -> dict[str, Any]:
    """``GET agents/<name>/threads/<id>/results/<call_id>?cursor=&limit=``: rows of a result's
    frame beyond those a thread page holds."""
    _json.check_unknown(query, {"cursor", "limit"})
    cursor = _json.cursor_param(query)
    limit = _json.int_param(query, "limit", _json.MAX_ROWS, _json.MAX_ROWS)
    thread = source.thread(thread_id)
    found = next((r for r in thread.tool_results() if r.call_id == call_id), None)
    if found is None:
        raise ApiError(404, f"no result of call {call_id!r} in this thread")
    if not is_dataframe(found.data):
        raise ApiError(404, f"the result of call {call_id!r} holds no table")
    return _json.frame_page_json(found.data, cursor, limit)


@dataclass(frozen=True)
class Read:
    """One read endpoint: its path under the API's URL (``{name}`` is the agent, each other
    ``{param}`` one path segment passed to ``answer`` by name) and what answers it."""

    path: str
    answer: Callable[..., dict[str, Any]]

    def pattern(self) -> str:
        """The path as a regex of named groups (tornado's form; Starlette takes ``path``)."""
        return re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", self.path)


READS = (
    Read("agents/{name}", load),
    Read("agents/{name}/threads", threads),
    Read("agents/{name}/threads/{thread_id}/results/{call_id}", results),
)
