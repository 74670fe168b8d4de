"""Synchronous entry points: one private event loop on a daemon thread.

Scripts, terminal IPython and notebook cells all call ``run_sync``. Inside Jupyter the kernel's
own loop is already running in the main thread, so the coroutine runs on this private loop
instead, and the user's kernel stays unpatched (no nest-asyncio). Widget buttons hand work to
the same loop without blocking, from whatever thread delivers the click.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from loom_nb._errors import UserError

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def loop() -> asyncio.AbstractEventLoop:
    """The private loop, started on first use."""
    global _loop, _thread
    with _lock:
        if _loop is None or _thread is None or not _thread.is_alive():
            _loop = asyncio.new_event_loop()
            _thread = threading.Thread(target=_loop.run_forever, name="loom-nb-loop", daemon=True)
            _thread.start()
        return _loop


def submit(coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    """Start ``coro`` on the private loop and return at once (for button clicks)."""
    return asyncio.run_coroutine_threadsafe(coro, loop())


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to the end and return its result; Ctrl-C / kernel interrupt cancels it."""
    if threading.current_thread() is _thread:
        coro.close()
        raise UserError(
            "a synchronous loom_nb call was made from inside a running agent; "
            "use the async form (await agent.run(...)) there"
        )
    future = submit(coro)
    try:
        return future.result()
    except KeyboardInterrupt:
        # Cancel the run and let it finish its cleanup: what completed is already saved.
        future.cancel()
        concurrent.futures.wait([future], timeout=10)
        raise
