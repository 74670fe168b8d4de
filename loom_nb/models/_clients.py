"""What every provider adapter needs of its SDK client: one client per event loop, and the key
sent to servers that need none. No SDK is imported here."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

#: Sent as the key to servers that need none (the SDKs refuse to start without one).
NO_KEY = "not-needed"


class _Closable(Protocol):
    async def close(self) -> None: ...


_Client = TypeVar("_Client", bound=_Closable)


class ClientPerLoop(Generic[_Client]):
    """One SDK client per event loop, made on first use.

    A client holds a connection pool bound to the event loop that used it, so
    ``await agent.run(...)`` and ``agent.run_sync(...)`` (a loop of its own) each need theirs.
    """

    def __init__(self, make: Callable[[], _Client]) -> None:
        self._make = make
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Client] = (
            weakref.WeakKeyDictionary()
        )

    def get(self) -> _Client:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = self._make()
        return client

    async def aclose(self) -> None:
        """Close the running loop's client; the next :meth:`get` makes a new one."""
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()
