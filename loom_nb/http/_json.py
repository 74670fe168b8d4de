"""The JSON forms the thread API answers with, their bounds, and the checks of its requests.

Both faces (the ASGI app and the Jupyter server extension) build their answers here, so a
thread reads the same from either. Every answer is bounded: messages per page, rows per frame,
characters per text and cell, and bytes per page (a page ends early rather than grow past
:data:`PAGE_BYTES`; its ``next_cursor`` says where the next one starts). The shapes are the
JSON Schema ``thread.schema.json`` beside this file (:data:`SCHEMA`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import quote

from loom_nb import _codec
from loom_nb._code import CodeContext, call_code, call_words
from loom_nb._messages import (
    NEWER,
    Message,
    NewerPart,
    PendingApproval,
    Thread,
    ThreadInfo,
    ToolCall,
    ToolResult,
)
from loom_nb._tools import Tool

#: The name and version of the answers' shape, written in each answer as ``"schema"``.
SCHEMA = "loom_nb.http/thread/1"
SCHEMA_PATH = Path(__file__).with_name("thread.schema.json")

#: Messages per page of a thread: by default, and at most.
MESSAGES = 100
MAX_MESSAGES = 500
#: Threads per page of a list or search: by default, and at most.
THREADS = 20
MAX_THREADS = 100
#: Search reaches this many threads deep (a store searches from the newest).
SEARCH_DEPTH = 1000
#: Rows of each frame a thread page holds; a result's own pages hold up to MAX_ROWS.
ROWS = 50
MAX_ROWS = 1000
#: Columns of a frame shown (the rest are counted in ``total_columns``).
COLUMNS = 100
#: Characters of a message's text, a tool result's content, and a table cell.
TEXT_CHARS = 100_000
CELL_CHARS = 2_000
#: A page of messages stops growing at this many bytes of JSON (it holds one message at least).
PAGE_BYTES = 4_000_000
#: One message bigger than this is sent with its frames cut to a few rows and its other data
#: left out (the results endpoint pages any frame whole).
MESSAGE_BYTES = 1_000_000
#: Longest search text, thread id and call id accepted, and the largest request body.
QUERY_CHARS = 200
ID_CHARS = 200
BODY_BYTES = 65_536
#: Items of a list or mapping, and levels of nesting, shown of a result's or preview's data.
ITEMS = 1000
DEPTH = 12

#: What ``new_thread_id`` makes: 128 random bits, URL-safe base64 (22 characters).
_THREAD_ID_128 = re.compile(r"[A-Za-z0-9_-]{22}\Z")


class ApiError(Exception):
    """A request the API answers with ``status`` and ``{"error": message, **extra}``."""

    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.extra = extra

    def body(self) -> dict[str, Any]:
        return {"error": self.message, **self.extra}


def not_found(agent: str) -> ApiError:
    """The one answer for a thread that is missing, another user's, or not a 128-bit id
    without auth: the same bytes for each, so none tells which."""
    return ApiError(404, f"no such thread for agent {agent!r}")


def is_thread_id_128(thread_id: str) -> bool:
    """Whether ``thread_id`` has the form of the ids loom_nb makes (128 random bits)."""
    return bool(_THREAD_ID_128.match(thread_id))


# ---- requests ----------------------------------------------------------------------------------


def text_param(query: Mapping[str, str], name: str, *, required: bool, limit: int) -> str | None:
    value = query.get(name)
    if value is None or value == "":
        if required:
            raise ApiError(400, f"the query parameter {name!r} is required")
        return None
    if len(value) > limit:
        raise ApiError(400, f"the query parameter {name!r} is longer than {limit} characters")
    return value


def int_param(query: Mapping[str, str], name: str, default: int, most: int) -> int:
    value = query.get(name)
    if value is None or value == "":
        return default
    if not value.isascii() or not value.isdigit() or len(value) > 9:
        raise ApiError(400, f"the query parameter {name!r} must be a whole number, not {value!r}")
    number = int(value)
    if not 1 <= number <= most:
        raise ApiError(400, f"the query parameter {name!r} must be between 1 and {most}")
    return number


def cursor_param(query: Mapping[str, str], most: int | None = None) -> int:
    """The position a ``cursor`` from an earlier page names (the start when there is none)."""
    value = query.get("cursor")
    if value is None or value == "":
        return 0
    if not value.isascii() or not value.isdigit() or len(value) > 9:
        raise ApiError(400, f"'cursor' must be a cursor an earlier page gave, not {value!r}")
    position = int(value)
    if most is not None and position > most:
        raise ApiError(400, f"'cursor' reaches past the {most} threads a search looks through")
    return position


def check_unknown(query: Mapping[str, str], known: set[str]) -> None:
    extra = sorted(set(query) - known)
    if extra:
        raise ApiError(
            400, f"unknown query parameter {extra[0]!r}; this endpoint takes {sorted(known)}"
        )


@dataclass
class DecisionRequest:
    call_id: str
    approve: bool
    digest: str


def decision_request(body: bytes) -> DecisionRequest:
    """The decision a POST's JSON body carries: ``{"call_id", "approve", "digest"}``."""
    if len(body) > BODY_BYTES:
        raise ApiError(413, f"the request body is larger than {BODY_BYTES} bytes")
    try:
        data = json.loads(body)
    except ValueError:
        raise ApiError(
            400, 'the request body must be JSON: {"call_id": ..., "approve": ..., "digest": ...}'
        ) from None
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object")
    extra = sorted(set(data) - {"call_id", "approve", "digest"})
    if extra:
        raise ApiError(400, f"unknown field {extra[0]!r}; a decision has call_id, approve, digest")
    call_id, approve, digest = data.get("call_id"), data.get("approve"), data.get("digest")
    if not isinstance(call_id, str) or not call_id or len(call_id) > ID_CHARS:
        raise ApiError(400, "'call_id' must be the id of the pending call (a string)")
    if not isinstance(approve, bool):
        raise ApiError(400, "'approve' must be true (approve) or false (reject)")
    if not isinstance(digest, str) or not digest or len(digest) > ID_CHARS:
        raise ApiError(400, "'digest' must be the digest of the pending call that was shown")
    return DecisionRequest(call_id, approve, digest)


@dataclass
class AnswerRequest:
    call_id: str
    answer: str
    digest: str


def answer_request(body: bytes) -> AnswerRequest:
    """The answer to a question a POST's JSON body carries: ``{"call_id", "answer",
    "digest"}`` (the text; the agent checks it is one of the question's choices)."""
    data = _body_object(body, '{"call_id": ..., "answer": ..., "digest": ...}')
    extra = sorted(set(data) - {"call_id", "answer", "digest"})
    if extra:
        raise ApiError(400, f"unknown field {extra[0]!r}; an answer has call_id, answer, digest")
    call_id, answer, digest = data.get("call_id"), data.get("answer"), data.get("digest")
    if not isinstance(call_id, str) or not call_id or len(call_id) > ID_CHARS:
        raise ApiError(400, "'call_id' must be the id of the pending question (a string)")
    if not isinstance(answer, str) or not answer.strip():
        raise ApiError(400, "'answer' must be the answer's text (a string, not empty)")
    if not isinstance(digest, str) or not digest or len(digest) > ID_CHARS:
        raise ApiError(400, "'digest' must be the digest of the pending question that was shown")
    return AnswerRequest(call_id, answer, digest)


def _body_object(body: bytes, form: str) -> dict[str, Any]:
    if len(body) > BODY_BYTES:
        raise ApiError(413, f"the request body is larger than {BODY_BYTES} bytes")
    try:
        data = json.loads(body)
    except ValueError:
        raise ApiError(400, f"the request body must be JSON: {form}") from None
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object")
    return data


# ---- reads both faces make ----------------------------------------------------------------------


def threads_page(
    listing: Callable[[int, int], list[ThreadInfo]],
    searching: Callable[[str, int], list[ThreadInfo]],
    text: str | None,
    limit: int,
    cursor: int,
) -> dict[str, Any]:
    """A page of threads, newest first: ``listing(limit, offset)`` or, with ``text``,
    ``searching(text, limit)`` (a store's search has no offset: it is asked for the threads up
    to the page's end, at most :data:`SEARCH_DEPTH`). One more than asked says whether a next
    page exists."""
    if text is None:
        found = listing(limit + 1, cursor)
    else:
        found = searching(text, min(cursor + limit + 1, SEARCH_DEPTH))[cursor:]
    return threads_json(found[:limit], cursor, len(found) > limit)


# ---- answers ------------------------------------------------------------------------------------


def thread_json(
    thread: Thread,
    tools: Mapping[str, Tool] | None,
    *,
    cursor: int = 0,
    limit: int = MESSAGES,
    results_url: str = "",
) -> dict[str, Any]:
    """A page of ``thread``: its record, ``limit`` messages from ``cursor`` (fewer when they
    reach :data:`PAGE_BYTES`), its pending calls and its usage. ``results_url`` + call id is
    where a frame cut to :data:`ROWS` rows is paged whole."""
    tools = tools or {}
    ctx = CodeContext("result", agent=thread.agent, thread_id=thread.id)
    total = len(thread.messages)
    start = min(cursor, total)
    messages: list[dict[str, Any]] = []
    size = 0
    position = start
    for position in range(start, min(start + limit, total)):
        entry, grown = message_json(thread.messages[position], position, tools, ctx, results_url)
        if messages and size + grown > PAGE_BYTES:
            break
        messages.append(entry)
        size += grown
    else:
        position = min(start + limit, total)
    usage = thread.usage
    return {
        "schema": SCHEMA,
        "id": thread.id,
        "agent": thread.agent,
        "title": thread.title,
        "created_at": thread.created_at.isoformat(),
        "updated_at": thread.updated_at.isoformat(),
        "status": thread.status,
        "error": thread.error,
        "messages": messages,
        "pending": [pending_json(p, tools, ctx) for p in thread.pending],
        "usage": {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "requests": usage.requests,
            "total_tokens": usage.total_tokens,
        },
        "page": {
            "cursor": str(start),
            "messages": len(messages),
            "total_messages": total,
            "next_cursor": str(position) if position < total else None,
        },
    }


def message_json(
    message: Message,
    index: int,
    tools: Mapping[str, Tool],
    ctx: CodeContext,
    results_url: str,
) -> tuple[dict[str, Any], int]:
    """One message as JSON, and about how many bytes it takes in a page."""
    entry = _message_json(message, index, tools, ctx, results_url, ROWS, keep_data=True)
    size = len(json.dumps(entry, ensure_ascii=False))
    if size > MESSAGE_BYTES:
        entry = _message_json(message, index, tools, ctx, results_url, 5, keep_data=False)
        size = len(json.dumps(entry, ensure_ascii=False))
    return entry, size + 1


def _message_json(
    message: Message,
    index: int,
    tools: Mapping[str, Tool],
    ctx: CodeContext,
    results_url: str,
    rows: int,
    *,
    keep_data: bool,
) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, ToolCall):
            parts.append(call_json(part, tools, ctx))
        elif isinstance(part, ToolResult):
            parts.append(result_json(part, results_url, rows, keep_data=keep_data))
        elif isinstance(part, NewerPart):
            parts.append({"kind": "newer", "part_kind": part.kind, "text": NEWER})
        else:  # text, and where a run was interrupted (read as its sentence: schema 1 kinds)
            parts.append({"kind": "text", **_text("text", part.text, TEXT_CHARS)})
    entry: dict[str, Any] = {
        "index": index,
        "role": message.role,
        "created_at": message.created_at.isoformat(),
        "model": message.model,
        "usage": None,
        "parts": parts,
    }
    if message.usage is not None:
        entry["usage"] = {
            "input_tokens": message.usage.input_tokens,
            "output_tokens": message.usage.output_tokens,
            "requests": message.usage.requests,
        }
    return entry


def call_json(call: ToolCall, tools: Mapping[str, Tool], ctx: CodeContext) -> dict[str, Any]:
    """A tool call: its arguments, in words (as the notebook folds it) and as code."""
    tool = tools.get(call.name)
    return {
        "kind": "tool_call",
        "id": call.id,
        "name": call.name,
        "arguments": value_json(call.arguments, ROWS),
        "raw_arguments": _cut(call.raw_arguments, TEXT_CHARS)
        if call.raw_arguments is not None
        else None,
        "words": call_words(call, tool),
        "code": call_code(call, tool, ctx),
    }


def result_json(
    result: ToolResult, results_url: str, rows: int = ROWS, *, keep_data: bool = True
) -> dict[str, Any]:
    """A tool result: the text the model saw, and its data (a frame as a table of its first
    ``rows`` rows, with where to page the rest)."""
    out: dict[str, Any] = {
        "kind": "tool_result",
        "call_id": result.call_id,
        "name": result.name,
        **_text("content", result.content, TEXT_CHARS),
        "is_error": result.is_error,
        "error": result.error,
        "approval": result.approval,
        "rule": result.rule,
        "data": None,
        "chart": result.chart is not None,
    }
    head = result.frame_head(rows)  # a stored frame: only these rows are decoded
    if head is not None:
        table = table_json(head.head, 0, head.rows, head.columns)
        if head.rows > rows and results_url:
            table["next"] = f"{results_url}{quote(result.call_id, safe='')}?cursor={rows}"
        out["data"] = table
    elif result.data is not None and keep_data:
        out["data"] = value_json(result.data, rows)
    return out


def pending_json(p: PendingApproval, tools: Mapping[str, Tool], ctx: CodeContext) -> dict[str, Any]:
    """A pending card: the call, in words, its preview, its digest (a decision names it) and
    where it is in its life."""
    call = ToolCall(p.call_id, p.tool, p.arguments)
    return {
        "call_id": p.call_id,
        "tool": p.tool,
        "arguments": value_json(p.arguments, ROWS),
        "words": call_words(call, tools.get(p.tool)),
        "code": call_code(call, tools.get(p.tool), ctx),
        "digest": p.digest,
        "state": p.state,
        "preview": value_json(p.preview, ROWS),
    }


def frame_page_json(frame: Any, cursor: int, limit: int) -> dict[str, Any]:
    """Rows ``cursor`` to ``cursor + limit`` of a result's frame."""
    total = len(frame)
    table = table_json(frame.iloc[cursor : cursor + limit], cursor, total, frame.shape[1])
    end = min(cursor + limit, total)
    return {"schema": SCHEMA, "table": table, "next_cursor": str(end) if end < total else None}


def threads_json(infos: list[ThreadInfo], cursor: int, more: bool) -> dict[str, Any]:
    """A page of a thread list or search, newest first."""
    return {
        "schema": SCHEMA,
        "threads": [
            {
                "id": i.id,
                "agent": i.agent,
                "title": i.title,
                "created_at": i.created_at.isoformat(),
                "updated_at": i.updated_at.isoformat(),
                "message_count": i.message_count,
                "pending_count": i.pending_count,
            }
            for i in infos
        ],
        "next_cursor": str(cursor + len(infos)) if more else None,
    }


def table_json(frame: Any, offset: int, total_rows: int, total_columns: int) -> dict[str, Any]:
    """A DataFrame as a JSON table: each column's label and pandas dtype (so a reader can
    rebuild the frame with the same dtypes), the index when it says something, and rows of
    JSON values (missing values as null, instants and dates as ISO 8601, Decimals as text)."""
    import pandas as pd

    shown = frame if frame.shape[1] <= COLUMNS else frame.iloc[:, :COLUMNS]
    cells = shown.to_numpy(dtype=object)  # one pass over the frame, each value as Python has it
    by_column = cells.T.tolist()
    columns = []
    for label, dtype, values in zip(shown.columns, shown.dtypes, by_column, strict=True):
        column = {"name": value_json(label, 0), "dtype": str(dtype)}
        if str(dtype) == "object":
            kind = _object_kind(values)
            if kind is not None:
                column["values"] = kind
        columns.append(column)
    index = shown.index
    plain = index.name is None and index.nlevels == 1 and isinstance(index, pd.RangeIndex)
    return {
        "type": "table",
        "columns": columns,
        "index": None
        if plain
        else {
            "names": [value_json(n, 0) for n in index.names],
            "dtypes": [str(index.get_level_values(i).dtype) for i in range(index.nlevels)],
            "values": [
                [cell_json(v) for v in (label if isinstance(label, tuple) else (label,))]
                for label in index.tolist()
            ],
        },
        "rows": [[cell_json(v) for v in row] for row in cells.tolist()],
        "offset": offset,
        "total_rows": total_rows,
        "total_columns": total_columns,
    }


#: The Python types of an object column's values that JSON has no type for, by the name a
#: table's column gives them (``"values"``); a datetime is a date too, so it goes first.
_OBJECT_KINDS: tuple[tuple[str, type], ...] = (
    ("datetime", datetime),
    ("date", date),
    ("time", time),
    ("duration", timedelta),
    ("decimal", Decimal),
)


def _object_kind(values: list[Any]) -> str | None:
    """What every present value of an object column is, when it is one of :data:`_OBJECT_KINDS`
    (its cells are then ISO 8601 or text, and the column says which)."""
    present = [v for v in values if v is not None and v == v]
    for name, kind in _OBJECT_KINDS:
        if present and all(isinstance(v, kind) for v in present):
            return name
    return None


def cell_json(value: Any) -> Any:
    """One value of a frame as JSON (see :func:`table_json`)."""
    kind = type(value)
    if kind is int or kind is bool:
        return value
    if kind is str:
        return _cut(value, CELL_CHARS)
    if kind is float and math.isfinite(value):
        return value
    import pandas as pd

    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, str):
        return _cut(value, CELL_CHARS)
    if isinstance(value, (pd.Timestamp, datetime, date, time)):
        return value.isoformat()
    if isinstance(value, (pd.Timedelta, timedelta)):
        return pd.Timedelta(value).isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if hasattr(value, "item") and not isinstance(value, (list, dict)):
        value = value.item()  # numpy scalars
    if isinstance(value, float):
        if math.isnan(value):
            return None
        return value if math.isfinite(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, int):
        return value
    if isinstance(value, (list, tuple, Mapping)):
        return value_json(value, 0, depth=DEPTH - 2)
    return _cut(str(value), CELL_CHARS)


def value_json(value: Any, rows: int, depth: int = 0) -> Any:
    """A result's or preview's data as bounded JSON: frames as tables of ``rows`` rows,
    mappings and lists cut at :data:`ITEMS` items and :data:`DEPTH` levels."""
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return cell_json(value)
    if isinstance(value, str):
        return _cut(value, TEXT_CHARS)
    if depth >= DEPTH:
        return "…"
    if _codec.is_dataframe(value):
        return table_json(value.head(rows), 0, len(value), value.shape[1])
    if isinstance(value, Mapping):
        items = list(value.items())[:ITEMS]
        return {str(k): value_json(v, rows, depth + 1) for k, v in items}
    if isinstance(value, (list, tuple)):
        return [value_json(v, rows, depth + 1) for v in value[:ITEMS]]
    series = getattr(value, "to_frame", None)
    if callable(series):  # a pandas Series
        return value_json(series(), rows, depth)
    return cell_json(value)


def _text(name: str, text: str, limit: int) -> dict[str, Any]:
    """``{name: text}`` cut at ``limit`` characters, and whether it was cut."""
    return {name: _cut(text, limit), f"{name}_truncated": len(text) > limit}


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
