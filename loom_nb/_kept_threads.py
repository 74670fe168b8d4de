"""The threads an agent ran, kept in memory so that the next turn appends instead of loading.

A kept thread is used only while its store's version says nothing changed since: another
kernel's turn, a decision made elsewhere, a deletion all bump it, and the thread is loaded
again. Only stores that report versions cheaply (:class:`VersionedStore`) take part; with
others every turn loads, as before.
"""

from __future__ import annotations

from collections import OrderedDict

from loom_nb._messages import Thread
from loom_nb._store import Store, ThreadVersion, VersionedStore

#: Threads kept per agent, the least recently run forgotten first.
KEPT = 16


class KeptThreads:
    def __init__(self, store: Store, size: int = KEPT) -> None:
        self.store = store
        self.versions = store if isinstance(store, VersionedStore) else None
        self.size = size
        self._threads: OrderedDict[str, tuple[Thread, ThreadVersion]] = OrderedDict()

    def load(self, thread_id: str, user_id: str | None) -> Thread | None:
        """The kept thread if the store still holds exactly it, else ``store.load`` (kept
        when no write came while it loaded)."""
        versions = self.versions
        if versions is None:
            return self.store.load(thread_id, user_id=user_id)
        now = versions.thread_version(thread_id, user_id=user_id)
        found = self._threads.get(thread_id)
        if found is not None and found[0].user_id == user_id and found[1] == now:
            self._threads.move_to_end(thread_id)
            return found[0]
        self._threads.pop(thread_id, None)
        thread = self.store.load(thread_id, user_id=user_id)
        unchanged = now is not None and versions.thread_version(thread_id, user_id=user_id) == now
        if thread is not None and now is not None and unchanged:
            self._keep(thread, now)
        return thread

    def __contains__(self, thread_id: str) -> bool:
        """Whether ``thread_id`` is kept (its version is compared when it is loaded)."""
        return thread_id in self._threads

    def keep(self, thread: Thread) -> None:
        """After a run: keep ``thread`` if the store holds exactly its messages (the run
        appended them; a message appended from elsewhere meanwhile shows in the count)."""
        if self.versions is not None:
            now = self.versions.thread_version(thread.id, user_id=thread.user_id)
            if now is not None:
                self._keep(thread, now)
                return
        self._threads.pop(thread.id, None)

    def forget(self, thread_id: str) -> None:
        self._threads.pop(thread_id, None)

    def _keep(self, thread: Thread, version: ThreadVersion) -> None:
        if version.messages != len(thread.messages):
            self._threads.pop(thread.id, None)
            return
        self._threads[thread.id] = (thread, version)
        self._threads.move_to_end(thread.id)
        while len(self._threads) > self.size:
            self._threads.popitem(last=False)
