"""Anthropic's Messages API stream, as the local wire server sends it (see ``_wire``)."""

from __future__ import annotations

from typing import Any

from tests.models._wire import Reply, event


def message_start(input_tokens: int = 25, cache_read: int = 0) -> str:
    usage: dict[str, Any] = {"input_tokens": input_tokens, "output_tokens": 1}
    if cache_read:
        usage["cache_read_input_tokens"] = cache_read
        usage["cache_creation_input_tokens"] = 0
    return event(
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "content": [],
                "model": "claude-test",
                "stop_reason": None,
                "stop_sequence": None,
                "usage": usage,
            },
        },
    )


def text_start(index: int) -> str:
    return event(
        "content_block_start",
        {
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "text", "text": ""},
        },
    )


def text_delta(index: int, piece: str) -> str:
    return event(
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "text_delta", "text": piece},
        },
    )


def text_block(index: int, *pieces: str) -> list[str]:
    return [
        text_start(index),
        event("ping", {"type": "ping"}),
        *(text_delta(index, p) for p in pieces),
        block_stop(index),
    ]


def tool_start(index: int, call_id: str, name: str) -> str:
    return event(
        "content_block_start",
        {
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}},
        },
    )


def tool_json(index: int, piece: str) -> str:
    return event(
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "input_json_delta", "partial_json": piece},
        },
    )


def block_stop(index: int) -> str:
    return event("content_block_stop", {"type": "content_block_stop", "index": index})


def tool_block(index: int, call_id: str, name: str, *pieces: str) -> list[str]:
    return [
        tool_start(index, call_id, name),
        *(tool_json(index, p) for p in pieces),
        block_stop(index),
    ]


def finish(stop: str = "end_turn", output_tokens: int = 10) -> list[str]:
    return [
        event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": output_tokens},
            },
        ),
        event("message_stop", {"type": "message_stop"}),
    ]


def stream(
    *blocks: list[str] | str,
    stop: str = "end_turn",
    usage: tuple[int, int] = (25, 10),
    **reply: Any,
) -> Reply:
    events = [message_start(usage[0])]
    for b in blocks:
        events.extend([b] if isinstance(b, str) else b)
    events += finish(stop, usage[1])
    return Reply(events=events, **reply)


def text(*pieces: str, usage: tuple[int, int] = (25, 10)) -> Reply:
    return stream(text_block(0, *pieces), usage=usage)


def error(status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> Reply:
    body = {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_1"}
    return Reply(status, body, headers={"request-id": "req_1", **(headers or {})})


def error_event(kind: str, message: str) -> str:
    """An ``error`` event inside a 200 stream."""
    return event("error", {"type": "error", "error": {"type": kind, "message": message}})
