"""The private event-loop thread: one asyncio loop on a daemon thread, for synchronous calls.

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
    finished = threading.Event()
    task: asyncio.Task[T] | None = None
    interrupted = False

    async def guarded() -> T:
        nonlocal task
        try:
            if interrupted:  # Ctrl-C came before the run started
                coro.close()
                raise asyncio.CancelledError
            task = asyncio.current_task()  # type: ignore[assignment]
            return await coro
        finally:
            finished.set()

    def cancel() -> None:
        nonlocal interrupted
        interrupted = True
        if task is not None:
            task.cancel()

    private_loop = loop()
    try:
        return submit(guarded()).result()
    except KeyboardInterrupt:
        # Ctrl-C may land at any point, even while the run is being handed over: cancel it on
        # its own loop and wait for its cleanup, so the thread records what completed.
        private_loop.call_soon_threadsafe(cancel)
        finished.wait(10)
        raise
