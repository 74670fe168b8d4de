"""The private event-loop thread: one asyncio loop on a daemon thread, for synchronous calls.

Scripts, terminal IPython and notebook cells all call ``run_sync``. Inside Jupyter the kernel's
own loop is already running in the main thread, so the coroutine runs on this private loop
instead, and the user's kernel stays unpatched (no nest-asyncio). Widget buttons hand work to
the same loop without blocking, from whatever thread delivers the click.

User code never runs on this loop's thread: sync tools, sync model functions and previews run
on worker threads kept between calls (``in_thread``), woken on their caller's processor. An
async tool that blocks anyway (``time.sleep`` in an ``async def``) is named by a watchdog in a
warning. Ctrl-C returns within a second whatever the loop is doing; only an approved write
that is running is waited for, a bounded time.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import os
import queue
import sys
import threading
import time
import warnings
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from types import CodeType
from typing import Any, TypeVar

from loom_nb._errors import UserError

T = TypeVar("T")

#: How long Ctrl-C waits for an interrupted run to record what completed (unless an approved
#: write is running: then the agent's ``interrupt_wait``).
CLEANUP_SECONDS = 0.5
#: How long Ctrl-C lets a give-up record "unknown" in the store (a hung store is not waited for:
#: the lease then lapses and the next run records it).
GIVE_UP_SECONDS = 0.2
#: The watchdog names user code that holds the loop longer than this.
BLOCKED_SECONDS = 1.0

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def loop() -> asyncio.AbstractEventLoop:
    """The private loop, started on first use (with its watchdog)."""
    global _loop, _thread
    with _lock:
        if _loop is None or _thread is None or not _thread.is_alive():
            _loop = asyncio.new_event_loop()
            _thread = threading.Thread(target=_loop.run_forever, name="loom-nb-loop", daemon=True)
            _thread.start()
            threading.Thread(
                target=_watch, args=(_loop, _thread), name="loom-nb-watchdog", daemon=True
            ).start()
        return _loop


def submit(coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    """Start ``coro`` on the private loop and return at once (for button clicks)."""
    return asyncio.run_coroutine_threadsafe(coro, loop())


# ---- interrupts ---------------------------------------------------------------------------------


@dataclass
class _Write:
    label: str
    seconds: float
    #: Records the write's outcome as unknown; called from the main thread when the loop
    #: cannot do it in time.
    give_up: Callable[[], None]
    #: Whether the write itself still runs (once it returned, only saving its result is
    #: left, which the store's own deadline bounds: Ctrl-C does not wait for that).
    running: Callable[[], bool]


class Interrupt:
    """What one ``run_sync`` call's run can ask: was Ctrl-C pressed (set at once, from the main
    thread, even while the loop is blocked), and which approved writes Ctrl-C must wait for."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self._writes: dict[int, _Write] = {}
        self._lock = threading.Lock()

    def writes(self) -> list[_Write]:
        with self._lock:
            return list(self._writes.values())

    @contextlib.contextmanager
    def protect(
        self,
        label: str,
        seconds: float,
        give_up: Callable[[], None],
        running: Callable[[], bool] = lambda: True,
    ) -> Iterator[None]:
        key = id(object())
        with self._lock:
            self._writes[key] = _Write(label, seconds, give_up, running)
        try:
            yield
        finally:
            with self._lock:
                self._writes.pop(key, None)


_interrupt: contextvars.ContextVar[Interrupt | None] = contextvars.ContextVar(
    "loom_nb_interrupt", default=None
)


def interrupt() -> Interrupt | None:
    """The ``run_sync`` call this code runs under (None for buttons and ``await`` callers)."""
    return _interrupt.get()


def interrupted() -> bool:
    """True once Ctrl-C stopped the ``run_sync`` call this code runs under: an interrupted run
    appends nothing more, however late its code gets control back."""
    token = _interrupt.get()
    return token is not None and token.event.is_set()


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to the end and return its result; Ctrl-C / kernel interrupt cancels it."""
    if threading.current_thread() is _thread:
        coro.close()
        raise UserError(
            "a synchronous loom_nb call was made from inside a running agent; "
            "use the async form (await agent.run(...)) there"
        )
    finished = threading.Event()
    token = Interrupt()
    task: asyncio.Task[T] | None = None

    async def guarded() -> T:
        nonlocal task
        try:
            if token.event.is_set():  # Ctrl-C came before the run started
                coro.close()
                raise asyncio.CancelledError
            _interrupt.set(token)
            task = asyncio.current_task()  # type: ignore[assignment]
            return await coro
        finally:
            finished.set()

    def cancel() -> None:
        if task is not None:
            task.cancel()

    private_loop = loop()
    try:
        return submit(guarded()).result()
    except KeyboardInterrupt:
        # Ctrl-C may land at any point, even while the run is being handed over: cancel it on
        # its own loop and give it a moment to record what completed.
        token.event.set()
        private_loop.call_soon_threadsafe(cancel)
        _wait_after_interrupt(token, finished, lambda: _post(private_loop, cancel))
        raise


def _post(target: asyncio.AbstractEventLoop, fn: Callable[[], None]) -> None:
    target.call_soon_threadsafe(fn)


def _wait_after_interrupt(
    token: Interrupt, finished: threading.Event, cancel_again: Callable[[], None]
) -> None:
    writes = token.writes()
    if not writes:
        finished.wait(CLEANUP_SECONDS)
        return
    seconds = max(w.seconds for w in writes)
    names = ", ".join(w.label for w in writes)
    print(
        f"loom_nb: waiting up to {seconds:g} s for {names} to finish, so that its result is "
        "saved (Ctrl-C again to stop waiting; its outcome is then recorded as unknown)",
        file=sys.stderr,
        flush=True,
    )
    try:
        done = _wait_for_writes(token, finished, seconds)
    except KeyboardInterrupt:
        done = False
        cancel_again()
    if not done:  # the loop is blocked or the write runs on: record the outcome from here
        _give_up(token.writes())


def _wait_for_writes(token: Interrupt, finished: threading.Event, seconds: float) -> bool:
    """Wait until the run ended, up to ``seconds`` while a write still runs, then at most
    CLEANUP_SECONDS more (a store that hangs saving a result is not waited for)."""
    end = time.monotonic() + seconds
    returned_at: float | None = None
    while not finished.wait(0.05):
        now = time.monotonic()
        if returned_at is None and not any(w.running() for w in token.writes()):
            returned_at = now
        if now > end + CLEANUP_SECONDS or (
            returned_at is not None and now > returned_at + CLEANUP_SECONDS
        ):
            return False
    return True


def _give_up(writes: list[_Write]) -> None:
    """Record the writes' outcome as unknown, from a thread of its own: if the store hangs,
    Ctrl-C still returns (the run's lease then lapses and the next run records it)."""

    def give_up_all() -> None:
        for write in writes:
            with contextlib.suppress(Exception):
                write.give_up()

    worker = threading.Thread(target=give_up_all, name="loom-nb-give-up", daemon=True)
    worker.start()
    worker.join(GIVE_UP_SECONDS)


# ---- user code off the loop ---------------------------------------------------------------------


#: How long the loop waits, blocked, for a sync call to return before it awaits it instead: a
#: quick function (a lookup, a test model) then costs no wake-up of the loop, and a slow one
#: holds the loop no longer than this.
QUICK_SECONDS = 0.0002


async def in_thread(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` on a worker thread, awaited without blocking the loop (but for
    :data:`QUICK_SECONDS`).

    A cancelled caller returns at once; the function finishes in the background and its
    result is dropped (Python cannot stop a thread).
    """
    handoff = _Handoff(fn, args, kwargs)
    _workers.run(handoff)
    if _quick_wait(handoff.ready):
        outcome = handoff.outcome
    else:
        outcome = await handoff.later(asyncio.get_running_loop())
    result, error = outcome  # type: ignore[misc]
    if error is not None:
        raise error
    return result  # type: ignore[no-any-return]


#: The first part of the quick wait, spent polling (yielding the processor and the GIL to the
#: worker): a timed wait this short costs a timer of its own, more than a quick call.
SPIN_SECONDS = 0.00005
_yield: Callable[[], None] = getattr(os, "sched_yield", lambda: time.sleep(0))


def _quick_wait(ready: threading.Lock) -> bool:
    """Take ``ready`` within :data:`QUICK_SECONDS`, polling it for the first
    :data:`SPIN_SECONDS`; False if it stayed held."""
    end = time.monotonic() + SPIN_SECONDS
    while not ready.acquire(blocking=False):
        if time.monotonic() > end:
            return ready.acquire(timeout=QUICK_SECONDS - SPIN_SECONDS)
        _yield()
    return True


class _Handoff:
    """One call, and its outcome from the worker to the loop: taken at once if it comes within
    the quick wait, else set on a future the loop awaits.

    The worker always releases ``ready`` first, then looks for a future; the loop sets the
    future first, then tries ``ready`` once more. So whichever comes second sees the other's
    step, and the outcome is taken exactly one way.
    """

    __slots__ = ("args", "context", "cpu", "fn", "future", "kwargs", "loop", "outcome", "ready")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]):
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.context = contextvars.copy_context()  # the caller's: its interrupt, its call id
        self.ready = threading.Lock()
        self.ready.acquire()
        self.outcome: _Outcome | None = None
        self.future: asyncio.Future[_Outcome] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        #: The processor the caller handed the call over on (None: not known here).
        self.cpu = _nearby.here()

    def work(self) -> None:
        """On the worker: run the call (nothing it raises escapes), then hand it over."""
        try:
            self.outcome = self.context.run(self.fn, *self.args, **self.kwargs), None
        except Exception as exc:
            self.outcome = None, exc
        except BaseException as exc:  # SystemExit and the like must not hang the run
            self.outcome = None, RuntimeError(f"{type(exc).__name__} in {_name(self.fn)}")

    def deliver(self) -> None:
        """On the worker, once it is idle again: wake the loop (see the class)."""
        self.ready.release()
        loop = self.loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(self._settle)

    def later(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future[_Outcome]:
        """On the loop, after the quick wait: the future that gets the outcome."""
        future = self.future = loop.create_future()
        self.loop = loop
        if self.ready.acquire(blocking=False):  # delivered meanwhile, maybe before the future
            assert self.outcome is not None
            future.set_result(self.outcome)
        return future

    def _settle(self) -> None:
        future = self.future
        if future is not None and not future.done():  # else taken already, or cancelled
            assert self.outcome is not None
            future.set_result(self.outcome)


_Outcome = tuple[Any, "BaseException | None"]


class _Workers:
    """Daemon threads kept between calls: starting a thread costs more than the loop's own work
    for a quick tool. Unlike ``ThreadPoolExecutor`` the pool has no size: a call takes an idle
    worker or starts one, so calls abandoned by Ctrl-C never make later ones wait, and the
    interpreter never joins a worker at exit. A worker idle for ``IDLE_SECONDS`` ends."""

    IDLE_SECONDS = 30.0

    def __init__(self) -> None:
        self._forget()

    def _forget(self) -> None:
        """No workers: in a forked child the parent's are gone (their lock may be held too)."""
        self._lock = threading.Lock()
        #: Idle workers: each one's inbox and thread id.
        self._idle: list[tuple[queue.SimpleQueue[_Handoff], int]] = []

    def run(self, job: _Handoff) -> None:
        """``job.work()`` then ``job.deliver()`` on a worker, which is idle again before
        ``deliver`` wakes the caller (so the caller's next call finds it free instead of
        starting another)."""
        with self._lock:
            idle = self._idle.pop() if self._idle else None
        if idle is None:
            inbox: queue.SimpleQueue[_Handoff] = queue.SimpleQueue()
            threading.Thread(
                target=self._serve, args=(inbox,), name="loom-nb-worker", daemon=True
            ).start()
            job.cpu = None  # a new worker starts wherever the kernel puts it
        else:
            inbox, worker = idle
            if job.cpu is not None:
                _nearby.pin(worker, {job.cpu})  # woken next to the caller (see _Nearby)
        inbox.put(job)

    def _serve(self, inbox: queue.SimpleQueue[_Handoff]) -> None:
        free = _nearby.mask()  # the caller's, as the thread inherited it
        idle = inbox, threading.get_native_id()
        while True:
            try:
                if _polled(inbox, WARM_SECONDS):
                    job = inbox.get()
                else:
                    job = inbox.get(timeout=self.IDLE_SECONDS)
            except queue.Empty:
                with self._lock:
                    if idle in self._idle:  # not handed a job meanwhile: end
                        self._idle.remove(idle)
                        return
                continue  # a job is being put: take it
            if job.cpu is not None:  # the call, and any thread it starts, may use them all
                _nearby.unpin(free)
            job.work()
            with self._lock:
                self._idle.append(idle)
            job.deliver()
            del job  # the call's arguments and outcome are not kept while idle


#: How long a worker that just finished polls for its next call before it blocks: a run's next
#: call comes tens of µs later, and waking a worker blocked that long costs 20-60 µs where the
#: kernel has idled its core meanwhile (a polled worker takes the call in a few).
WARM_SECONDS = 0.0005


def _polled(inbox: queue.SimpleQueue[_Handoff], seconds: float) -> bool:
    """Whether a job is in ``inbox`` within ``seconds``, polling it (yielding the processor and
    the GIL between looks)."""
    end = time.monotonic() + seconds
    while inbox.empty():
        if time.monotonic() > end:
            return False
        _yield()
    return True


class _Nearby:
    """Where an idle worker is woken: on the processor its caller hands it a call from (the
    caller pins the sleeping worker there just before the hand-over). Waking a thread on the
    other processor costs 20-60 µs where the kernel has halted that idle processor (as on these
    virtual machines), and the GIL lets only one of the two threads run anyway; woken on the
    caller's processor, the worker runs as the caller yields (bench_agent: a run's three
    handoffs 245-276 µs before, 50-67 µs after). The worker unpins itself before it runs the
    call, so the call and any thread it starts may use every processor. Linux only
    (``sched_getcpu``, ``sched_setaffinity``); elsewhere, or once the system refuses a mask,
    workers are woken wherever the kernel puts them."""

    def __init__(self) -> None:
        self._getcpu: Callable[[], int] | None = None
        self._ready = False

    def here(self) -> int | None:
        """The calling thread's processor now, or None."""
        if not self._ready:
            self._start()
        getcpu = self._getcpu
        return getcpu() if getcpu is not None else None

    def mask(self) -> set[int] | None:
        """The calling thread's processors (None: not known here)."""
        if not self._ready:
            self._start()
        if self._getcpu is None:
            return None
        return os.sched_getaffinity(0)

    def pin(self, thread: int, cpus: set[int]) -> None:
        """Let ``thread`` (a native id) run only on ``cpus``, while pinning works here."""
        if self._getcpu is None:
            return
        try:
            os.sched_setaffinity(thread, cpus)
        except (OSError, ValueError):  # a processor taken away (cpusets): stop pinning
            self._getcpu = None

    def unpin(self, cpus: set[int] | None) -> None:
        """Let the calling thread run on ``cpus`` again (None: not known), even after pinning
        stopped: a worker pinned before must not run a call pinned."""
        if cpus is not None:
            with contextlib.suppress(OSError, ValueError):
                os.sched_setaffinity(0, cpus)

    def _start(self) -> None:
        self._ready = True
        if not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2:
            return
        try:
            import ctypes

            getcpu = ctypes.CDLL(None).sched_getcpu
        except (OSError, AttributeError):
            return
        getcpu.restype, getcpu.argtypes = ctypes.c_int, []
        if getcpu() >= 0:
            self._getcpu = getcpu


_nearby = _Nearby()


_workers = _Workers()
os.register_at_fork(after_in_child=_workers._forget)


def _name(fn: Any) -> str:
    return str(getattr(fn, "__qualname__", None) or type(fn).__name__)


# ---- the watchdog -------------------------------------------------------------------------------

#: Code objects of user functions that run on the loop (async tools and model functions), with
#: the name the warning gives them.
_labels: dict[CodeType, str] = {}


def name_user_code(fn: Any, label: str) -> None:
    """Let the watchdog call ``fn`` by ``label`` (e.g. "tool 'refund'") if it blocks."""
    code = getattr(fn, "__code__", None)
    if isinstance(code, CodeType):
        _labels[code] = label


def _watch(watched: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    """Post a heartbeat to the loop; when it is not answered in time, find whose code holds
    the loop and warn once for that episode."""
    while thread.is_alive() and not watched.is_closed():
        beat = threading.Event()
        try:
            watched.call_soon_threadsafe(beat.set)
        except RuntimeError:
            return
        if beat.wait(BLOCKED_SECONDS):
            time.sleep(BLOCKED_SECONDS / 4)
            continue
        label = _blocking_code(thread)
        if label is not None:
            warnings.warn(
                f"{label} has blocked loom_nb's event loop for over {BLOCKED_SECONDS:g} s "
                "(blocking code such as time.sleep in an async def): other runs and buttons "
                "wait, and Ctrl-C cannot stop it. Make it a plain def (it then runs in a "
                "worker thread), or await asyncio.to_thread(...) for the blocking part",
                RuntimeWarning,
                stacklevel=1,
            )
        while not beat.wait(BLOCKED_SECONDS) and thread.is_alive():
            pass


def _blocking_code(thread: threading.Thread) -> str | None:
    frame = sys._current_frames().get(thread.ident or -1)
    while frame is not None:
        label = _labels.get(frame.f_code)
        if label is not None:
            return label
        frame = frame.f_back
    return None
