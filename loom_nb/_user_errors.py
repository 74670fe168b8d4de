"""Exceptions raised by the user's own code (a tool, a preview, a model function, a
connector's client factory), kept in
memory so that the views can show where in that code it failed.

The thread keeps only the message (the model reads it, the store saves it); the traceback
lives as long as the kernel, for the last :data:`KEPT` calls, keyed by call id.
"""

from __future__ import annotations

import contextvars
import os
import threading
import types
from collections import OrderedDict

KEPT = 200
_PACKAGE = os.path.dirname(os.path.realpath(__file__))
_kept: OrderedDict[str, BaseException] = OrderedDict()
_lock = threading.Lock()
#: The call (or preview) whose user code runs now: code a tool calls in turn (a connector's
#: client factory) keeps its exception under it, though the tool answers with an error result.
_running: contextvars.ContextVar[str | None] = contextvars.ContextVar("loom_call", default=None)


def keep(key: str, exc: BaseException) -> None:
    """Remember ``exc`` (raised by user code) for the call ``key``."""
    with _lock:
        _kept[key] = exc
        _kept.move_to_end(key)
        while len(_kept) > KEPT:
            _kept.popitem(last=False)


def running(key: str) -> _Running:
    """User code run within this block fails under ``key`` (see :func:`keep_for_running`)."""
    return _Running(key)


class _Running:
    """:func:`running`'s block: a class, not ``@contextmanager`` (it wraps every tool call)."""

    __slots__ = ("_key", "_token")

    def __init__(self, key: str) -> None:
        self._key = key

    def __enter__(self) -> None:
        self._token = _running.set(self._key)

    def __exit__(self, *exc: object) -> None:
        _running.reset(self._token)


def keep_for_running(exc: BaseException) -> None:
    """Remember ``exc`` (raised by user code a tool called) for the call running now."""
    key = _running.get()
    if key is not None:
        keep(key, exc)


def kept(key: str) -> BaseException | None:
    """The exception kept for ``key``, if this kernel saw it."""
    with _lock:
        return _kept.get(key)


def preview_key(call_id: str) -> str:
    """The key of a call's preview (the card), beside the call's own."""
    return f"preview:{call_id}"


def origin(exc: BaseException) -> BaseException:
    """The user's exception behind ``exc``: loom_nb's errors say what failed and keep the
    user's exception as their cause (``raise ... from exc``)."""
    from loom_nb._errors import LoomError

    while isinstance(exc, LoomError) and exc.__cause__ is not None:
        exc = exc.__cause__
    return exc


def users_traceback(exc: BaseException) -> types.TracebackType | None:
    """``exc``'s traceback from the first frame outside loom_nb, asyncio and the threads that
    ran it: the part a person can act on (None when no frame is theirs)."""
    tb = exc.__traceback__
    while tb is not None and _machinery(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    return tb


def _machinery(filename: str) -> bool:
    path = filename.replace("\\", "/")
    return filename.startswith(_PACKAGE) or any(
        f"/{part}/" in path or path.endswith(f"/{part}.py")
        for part in ("asyncio", "concurrent", "threading")
    )
