"""Messages to rows and back, for the stores that keep messages as rows (SQLite, PostgreSQL),
the thread's own row, and the pending calls it keeps as one JSON list.

A message row keeps the message's JSON form with the structured data of its tool results cut
out into a column of its own. Loading a thread parses the light part only; each tool result's
data (a DataFrame, usually) is decoded the first time it is read, so opening a thread of
thousands of messages does not build a thousand DataFrames. A DataFrame's outline (its labels
and counts) stays in the light part, so an export of the thread parses none of the data.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Collection, Iterable, Sequence
from datetime import datetime, timezone
from typing import Any

from loom_nb import _codec
from loom_nb._messages import CallState, Lease, Message, PendingApproval, Thread
from loom_nb._messages import ToolResult as _ToolResult
from loom_nb._store import _searchable, moved

_UNSET: Any = object()


def message_row(message: Message) -> tuple[str, str, str, str | None, str]:
    """``(role, created_at, json, data, search)`` for one message."""
    out = message.to_dict()
    data: list[Any] = []
    for part in out["parts"]:
        if "data" in part:  # keep the key (null) as a marker: this part has data
            data.append(part["data"])
            outline = _codec.encoded_outline(part["data"])
            if outline is not None:  # read without the rows (``ToolResult._frame_outline``)
                part["outline"] = outline
            part["data"] = None
        else:
            data.append(None)
    data_json = (
        json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        if any(d is not None for d in data)
        else None
    )
    return (
        message.role,
        out["created_at"],
        json.dumps(out, ensure_ascii=False, separators=(",", ":")),
        data_json,
        _searchable(message),
    )


def searchable(out: dict[str, Any]) -> str:
    """What search looks in, from a message's JSON form: the same text as ``_searchable``."""
    parts = out["parts"]
    texts = ["".join(p["text"] for p in parts if p["kind"] == "text")]
    texts += [p["content"] for p in parts if p["kind"] == "tool_result"]
    return "\n".join(texts).casefold()


def row_message(text: str, data: str | None) -> Message:
    out = json.loads(text)
    message = Message.from_dict(out)
    if data is not None:
        raw = _RawData(data)
        for i, part in enumerate(out["parts"]):
            if "data" in part:
                outline = part.get("outline")  # none in rows an earlier loom_nb wrote
                message.parts[i] = ToolResult.stored(message.parts[i], raw, i, outline)
    return message


class _RawData:
    """The ``data`` column of one message, parsed once, when a tool result first needs it."""

    __slots__ = ("_items", "_lock", "_text")

    def __init__(self, text: str) -> None:
        self._text = text
        self._items: list[Any] | None = None
        self._lock = threading.Lock()

    def decode(self, index: int) -> Any:
        return _codec.decode(self._parsed()[index])

    def head(self, index: int, rows: int) -> _codec.FrameHead | None:
        return _codec.frame_head(self._parsed()[index], rows)

    def outline(self, index: int) -> tuple[Any, dict[str, Any] | None] | None:
        return _codec.frame_outline(self._parsed()[index])

    def _parsed(self) -> list[Any]:
        with self._lock:
            if self._items is None:
                self._items = json.loads(self._text)
            return self._items


class ToolResult(_ToolResult):
    """A :class:`loom_nb.ToolResult` read from the store: ``data`` is decoded on first access.

    It is a ToolResult in every way (isinstance, fields, ``to_dict``, ``dataclasses.replace``)
    and compares equal to the plain one it was saved from.
    """

    @classmethod
    def stored(cls, part: Any, raw: _RawData, index: int, outline: Any = None) -> ToolResult:
        result = cls(
            part.call_id,
            part.name,
            part.content,
            None,
            part.is_error,
            part.approval,
            part.chart,
            part.rule,
        )
        result.__dict__["_data"] = _UNSET
        result.__dict__["_raw"] = (raw, index, outline)
        return result

    @property  # type: ignore[override]
    def data(self) -> Any:
        value = self.__dict__.get("_data")
        if value is _UNSET:
            pending = self.__dict__.get("_raw")
            if pending is None:  # another thread decoded it meanwhile
                return self.__dict__["_data"]
            raw, index, _ = pending
            value = raw.decode(index)
            self.__dict__["_data"] = value
            self.__dict__.pop("_raw", None)
        return value

    @data.setter
    def data(self, value: Any) -> None:
        self.__dict__.pop("_raw", None)
        self.__dict__["_data"] = value

    def frame_head(self, rows: int) -> _codec.FrameHead | None:
        pending = self.__dict__.get("_raw")
        if pending is None:  # decoded already (or set)
            return super().frame_head(rows)
        raw: _RawData = pending[0]
        return raw.head(pending[1], rows)

    def _frame_outline(self) -> tuple[Any, dict[str, Any] | None] | None:
        pending = self.__dict__.get("_raw")
        if pending is None:  # decoded already (or set)
            return super()._frame_outline()
        raw, index, outline = pending
        return raw.outline(index) if outline is None else _codec.frame_outline(outline)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _ToolResult):
            return NotImplemented
        return _fields(self) == _fields(other)

    __hash__ = None  # type: ignore[assignment]


def _fields(r: _ToolResult) -> tuple[Any, ...]:
    return (r.call_id, r.name, r.content, r.data, r.is_error, r.approval, r.chart, r.rule, r.kind)


# ---- the thread's row ---------------------------------------------------------------------

#: What loading a thread reads of its row, in the order :func:`row_thread` takes.
THREAD_COLUMNS = (
    "id, agent, user_id, title, created_at, updated_at, pending, error, message_count, "
    "pending_count, lease_holder, lease_until_us"
)


def thread_row(thread: Thread) -> tuple[Any, ...]:
    """What saving a thread writes: ``(id, agent, user_id, title, created_at, updated_at,
    updated_us, pending, pending_count, error)``."""
    info = thread.info_dict()
    return (
        thread.id,
        thread.agent,
        thread.user_id,
        thread.title,
        info["created_at"],
        info["updated_at"],
        sort_key(thread.updated_at),
        json.dumps(info["pending"], ensure_ascii=False, separators=(",", ":")),
        len(thread.pending),
        thread.error,
    )


def row_thread(
    record: Sequence[Any], messages: Iterable[tuple[str, str | None]], *, lapsed: bool = False
) -> Thread:
    """A thread from its row (:data:`THREAD_COLUMNS`) and its messages' ``(json, data)``;
    ``lapsed``: the store found its lease lapsed, by its clock."""
    with _codec.collector_paused():  # thousands of messages, all kept: nothing to collect
        loaded = [row_message(text, data) for text, data in messages]
    thread = Thread.from_dict(
        {
            "id": record[0],
            "agent": record[1],
            "user_id": record[2],
            "title": record[3],
            "created_at": record[4],
            "updated_at": record[5],
            "pending": json.loads(record[6]),
            "error": record[7],
        },
        messages=loaded,
    )
    thread.lease = lease_of(record[10], record[11], lapsed=lapsed)
    return thread


def sort_key(moment: datetime) -> int:
    """Microseconds since the epoch: how the stores order and compare moments."""
    return round(moment.timestamp() * 1_000_000)


# ---- pending calls, kept as one JSON list in the thread's row ---------------------------------


def pending_text(pending: Sequence[PendingApproval]) -> str:
    """The thread's pending calls as the JSON text its row keeps."""
    return json.dumps([p.to_dict() for p in pending], ensure_ascii=False, separators=(",", ":"))


def moved_pending(
    text: str,
    call_ids: Sequence[str],
    state: CallState,
    expect: Collection[CallState],
    holder: str | None,
    message: Message | None,
) -> tuple[str, int]:
    """The saved pending list ``text`` after ``Store.update_calls``'s compare-and-set, and how
    many calls it holds. Previews stay encoded: a step never needs pandas to read them."""
    items = json.loads(text)
    previews = {p["call_id"]: p.pop("preview", None) for p in items}
    pending = moved(
        [PendingApproval.from_dict(p) for p in items], call_ids, state, expect, holder, message
    )
    out = [p.to_dict() for p in pending]
    for item in out:
        if previews.get(item["call_id"]) is not None:
            item["preview"] = previews[item["call_id"]]
    return json.dumps(out, ensure_ascii=False, separators=(",", ":")), len(out)


def lease_of(holder: str | None, until_us: int | None, *, lapsed: bool = False) -> Lease | None:
    """The lease a thread's row keeps in two columns (microseconds since the epoch), if any."""
    if holder is None or until_us is None:
        return None
    return Lease(holder, datetime.fromtimestamp(until_us / 1_000_000, timezone.utc), lapsed)
