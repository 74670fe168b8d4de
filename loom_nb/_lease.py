"""One run per thread, across processes: a lease on the thread, kept in the store.

A run takes the lease before it changes a thread and frees it at its end; a keeper thread
renews it meanwhile (off the event loop, so a blocked loop does not let it lapse). With a
store of :class:`~loom_nb._store.LeasedWrites` the lease rides on the run's writes: a new
thread's first run takes it in the write that creates the thread (no other run can know the
thread before), and a run that ends with an answer frees it in the write that saves it.

A holder is ``host:pid:random``, one per run. A lease is taken over when it expired, or at
once when its holder is on this host and its process is gone (or it is this process's and no
run of it is alive: a run that died without freeing it). Containers on one machine can share
a host name (the host's network) while each numbers its processes anew, so the random part
starts with the holder's PID namespace (``ns<inode>.``, on Linux): a process number of
another namespace says nothing here, and only expiry frees its lease.

A call left ``running`` by a holder that is gone is ``unknown``: it may have run. ``settle``
shows that on a loaded thread; the run that takes the thread over records it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from loom_nb import _loop_thread
from loom_nb._errors import ThreadBusy
from loom_nb._messages import Lease, Thread, random_bytes
from loom_nb._store import LEASE_SECONDS, Store

__all__ = ["LEASE_SECONDS", "ThreadLease", "holder_gone", "settle", "where"]
#: How often a running run renews its lease.
RENEW_SECONDS = 5.0
#: How long a run waits for an interrupted run of this process on the same thread to end.
LOCAL_WAIT_SECONDS = 10.0

_HOST = socket.gethostname()


def _pid_namespace() -> str:
    """This process's PID namespace (``/proc/self/ns/pid``'s inode), or "" where there is none."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return ""


_NAMESPACE = _pid_namespace()


@dataclass
class _Local:
    thread_id: str
    interrupt: _loop_thread.Interrupt | None


#: Leases held by runs of this process, by holder.
_held: dict[str, _Local] = {}
_held_lock = threading.Lock()


def new_holder() -> str:
    tag = f"ns{_NAMESPACE}." if _NAMESPACE else ""
    return f"{_HOST}:{os.getpid()}:{tag}{random_bytes.take(6).hex()}"


def holder_gone(lease: Lease) -> bool:
    """True when ``lease``'s holder is known to be gone: a process of this machine that ended
    (or a run of this one that is over). Expiry is the store's to judge, by its clock."""
    host, pid, namespace = _where(lease.holder)
    if host != _HOST or pid is None or namespace not in (None, _NAMESPACE):
        return False  # another machine or container: only expiry tells
    if pid == os.getpid():
        with _held_lock:
            return lease.holder not in _held
    return not _process_alive(pid)


def where(holder: str) -> str:
    """Who ``holder`` is, for messages."""
    host, pid, namespace = _where(holder)
    if host != _HOST:
        return f"another kernel (process {pid} on {host})"
    if namespace not in (None, _NAMESPACE):
        return f"another kernel (process {pid} of another container on this machine)"
    if pid == os.getpid():
        return "this kernel (another run, or another agent object for the same agent)"
    return f"another kernel (process {pid})"


def settle(thread: Thread) -> Thread:
    """Show calls left ``running`` by a run that is gone as ``unknown`` (in ``thread`` only;
    the run that takes the thread over saves it). Gone means: the thread is free or another
    run holds it, the store found the lease lapsed by its own clock, or its holder is a
    process of this machine that ended. This kernel's clock is never compared with the
    store's, so a kernel whose clock is off never sees a live write as unknown."""
    lease = thread.lease
    for p in thread.pending:
        if p.state == "running" and (
            lease is None or lease.holder != p.holder or lease.lapsed or holder_gone(lease)
        ):
            p.state = "unknown"
    return thread


class ThreadLease:
    """The lease of one run on one thread. ``acquire`` it, ``release`` it at the run's end."""

    def __init__(self, store: Store, thread_id: str, user_id: str | None, holder: str) -> None:
        self.store = store
        self.thread_id = thread_id
        self.user_id = user_id
        self.holder = holder
        #: Set by the keeper when another run may have taken the thread (this one did not
        #: renew in time: a suspended process).
        self.lost = False
        self._released = False
        #: Whether the store has the lease (a new thread's lease is taken by its first write).
        self.in_store = True
        #: Whether the run's last write freed it (see :meth:`free_with`).
        self.freed_by_write = False
        self._renewed_at = time.time()  # the wall clock: a suspended machine's sleep counts
        self._lock = threading.Lock()

    @classmethod
    async def acquire(cls, store: Store, thread_id: str, user_id: str | None) -> ThreadLease:
        """Take the thread, or raise :class:`ThreadBusy` naming who runs it."""
        holder = new_holder()
        with _held_lock:  # ours before the store says so: this process never sees it as dead
            _held[holder] = _Local(thread_id, _loop_thread.interrupt())
        try:
            await _take(store, thread_id, user_id, holder)
        except BaseException:
            with _held_lock:
                _held.pop(holder, None)
            raise
        held = cls(store, thread_id, user_id, holder)
        _keeper.add(held)
        return held

    @classmethod
    def for_new_thread(cls, store: Store, thread_id: str, user_id: str | None) -> ThreadLease:
        """The lease of a new thread's first run, taken by the write that creates the thread
        (``LeasedWrites.start``; then call :meth:`started`)."""
        holder = new_holder()
        with _held_lock:
            _held[holder] = _Local(thread_id, _loop_thread.interrupt())
        held = cls(store, thread_id, user_id, holder)
        held.in_store = False
        return held

    def started(self) -> None:
        """The write that creates the thread took the lease: the keeper renews it from now."""
        self.in_store = True
        self._renewed_at = time.time()
        _keeper.add(self)

    def free_with(self, write: Callable[[], object]) -> None:
        """Run ``write``, a store write that frees this lease in its own transaction (the
        run's last): no renewal runs meanwhile or after. A failing write leaves it held."""
        with self._lock:
            self._released = True
            try:
                write()
            except BaseException:
                self._released = False
                raise
            self.freed_by_write = True
        _keeper.discard(self)
        with _held_lock:
            _held.pop(self.holder, None)

    def due(self) -> bool:
        """Whether the keeper should renew it now: a lease taken or renewed within half a
        round is left for the next round (a run's first seconds cost no renewal)."""
        return time.time() - self._renewed_at >= RENEW_SECONDS / 2

    def check(self) -> None:
        """Raise :class:`ThreadBusy` if another run took the thread from this one."""
        if not self.lost and time.time() - self._renewed_at > LEASE_SECONDS:
            self.renew()  # woken from a pause before the keeper: ask the store now
        if self.lost:
            raise ThreadBusy(
                f"another run took thread {self.thread_id} over while this one was paused (its "
                f"lease lapsed: no renewal for {LEASE_SECONDS:.0f} s); this run stopped, and "
                "what it did before is saved. Reload the thread"
            )

    def renew(self) -> None:
        """Extend the lease (the keeper thread calls this). Never takes a thread back: not
        after the run freed it, nor once it lapsed, when another run may have had it since."""
        with self._lock:
            if self.lost or self._released or not self.in_store:
                return
            if time.time() - self._renewed_at > LEASE_SECONDS:
                # Paused past the lease (a laptop lid, a stopped VM): it is still this run's
                # only if the store still names it (then no other run had the thread since).
                thread = self.store.load(self.thread_id, user_id=self.user_id)
                if thread is None or thread.lease is None or thread.lease.holder != self.holder:
                    self.lost = True
                    return
            lease = self.store.acquire_lease(
                self.thread_id, self.holder, LEASE_SECONDS, user_id=self.user_id
            )
            self.lost = lease.holder != self.holder
            self._renewed_at = time.time()

    @property
    def released(self) -> bool:
        return self._released

    def release(self, *, error: str | None, store: bool = True) -> None:
        """Free the thread and record how the run ended (a store failure is not raised: the
        lease then lapses on its own). ``store=False``: the store is failing, so it is not
        asked; this process sees the lease as free at once, others once it lapses.

        After the run's last write freed it (:meth:`free_with`), only an ``error`` that came
        later (a failing ``on_event``) is written: the lease is taken again and freed with it,
        unless another run took the thread meanwhile."""
        if self.freed_by_write:
            if error is not None and store:
                self._record_late(error)
            return
        with self._lock:  # after this, no renewal can take the thread again
            self._released = True
        _keeper.discard(self)
        try:
            if store and self.in_store:
                with contextlib.suppress(Exception):
                    self.store.release_lease(
                        self.thread_id, self.holder, error=error, user_id=self.user_id
                    )
        finally:
            with _held_lock:
                _held.pop(self.holder, None)

    def _record_late(self, error: str) -> None:
        with contextlib.suppress(Exception):  # as release's: the error is not raised
            lease = self.store.acquire_lease(
                self.thread_id, self.holder, LEASE_SECONDS, user_id=self.user_id
            )
            if lease.holder == self.holder:
                self.store.release_lease(
                    self.thread_id, self.holder, error=error, user_id=self.user_id
                )


async def _take(store: Store, thread_id: str, user_id: str | None, holder: str) -> None:
    replacing: str | None = None
    deadline = time.monotonic() + LOCAL_WAIT_SECONDS
    while True:
        lease = store.acquire_lease(
            thread_id, holder, LEASE_SECONDS, replacing=replacing, user_id=user_id
        )
        if lease.holder == holder:
            return
        if _interrupted_here(lease.holder) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)  # Ctrl-C stopped that run; it is saving its last step
            continue
        if lease.holder != replacing and holder_gone(lease):
            replacing = lease.holder
            continue
        raise ThreadBusy(
            f"thread {thread_id} is running in {where(lease.holder)}; wait for that run to "
            "end, then reload the thread. If that kernel is gone, the thread is free again "
            f"within {LEASE_SECONDS:.0f} s"
        )


class _Keeper:
    """One daemon thread that renews every lease this process holds."""

    def __init__(self) -> None:
        self._leases: set[ThreadLease] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()
        #: When the keeper's current wait ends (``time.monotonic``).
        self._next_round = 0.0

    def add(self, lease: ThreadLease) -> None:
        with self._lock:
            self._leases.add(lease)
            # The next round renews it in time (within 1.5 rounds); woken (a thread switch
            # on every run) only when the schedule was shortened since the keeper went to sleep.
            if self._next_round > time.monotonic() + RENEW_SECONDS:
                self._wake.set()
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._renew_forever, name="loom-nb-leases", daemon=True
                )
                self._thread.start()

    def discard(self, lease: ThreadLease) -> None:
        with self._lock:
            self._leases.discard(lease)

    def _renew_forever(self) -> None:
        while True:
            seconds = RENEW_SECONDS
            self._next_round = time.monotonic() + seconds
            self._wake.wait(seconds)
            self._wake.clear()
            with self._lock:
                leases = list(self._leases)
            for lease in leases:
                with contextlib.suppress(Exception):  # a store hiccup: try again next round
                    if lease.due():
                        lease.renew()


_keeper = _Keeper()


def _interrupted_here(holder: str) -> bool:
    """Is ``holder`` a run of this process that Ctrl-C stopped (and that is ending now)?"""
    with _held_lock:
        local = _held.get(holder)
    return local is not None and local.interrupt is not None and local.interrupt.event.is_set()


def _where(holder: str) -> tuple[str, int | None, str | None]:
    """``holder``'s host, process number and PID namespace (None: not said, as in holders of
    earlier versions, which are taken to be of this namespace)."""
    host, _, rest = holder.partition(":")
    pid, _, random = rest.partition(":")
    tag, dot, _ = random.partition(".")
    namespace = tag[2:] if dot and tag.startswith("ns") and tag[2:].isdigit() else None
    return host, int(pid) if pid.isdigit() else None, namespace


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    try:  # a killed process its parent has not reaped yet still answers: it is a zombie
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return True
