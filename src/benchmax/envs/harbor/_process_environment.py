"""A process-wide, loop-agnostic lease on a set of ``os.environ`` variables.

Callers that need an *equal* mapping share the lease; a caller that needs a
different mapping waits (asynchronously, on whichever event loop it runs) until
the last user leaves, at which point every variable is restored. State is
guarded by a thread lock and waiters are futures of their own loop, woken with
``call_soon_threadsafe``, so successive or concurrent event loops all work.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Mapping

__all__ = ["EnvironmentLease", "PROCESS_ENVIRONMENT"]


class EnvironmentLease:
    """Shared ownership of environment variables with restoration on last release."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active: dict[str, str] | None = None
        self._saved: dict[str, str | None] = {}
        self._users = 0
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    async def acquire(self, environment: Mapping[str, str]) -> None:
        """Expose ``environment`` in ``os.environ``, joining or waiting as needed."""
        wanted = dict(environment)
        loop = asyncio.get_running_loop()
        while True:
            with self._lock:
                if self._active is None:
                    self._saved = {key: os.environ.get(key) for key in wanted}
                    os.environ.update(wanted)
                    self._active = wanted
                    self._users = 1
                    return
                if self._active == wanted:
                    self._users += 1
                    return
                waiter: asyncio.Future[None] = loop.create_future()
                self._waiters.append((loop, waiter))
            try:
                await waiter
            finally:
                with self._lock:
                    if (loop, waiter) in self._waiters:
                        self._waiters.remove((loop, waiter))

    def release(self) -> None:
        """Leave the lease; the last user restores every variable and wakes waiters."""
        with self._lock:
            if self._users <= 0:
                raise RuntimeError("sandbox credential environment released more than acquired")
            self._users -= 1
            if self._users:
                return
            for key, previous in self._saved.items():
                if previous is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = previous
            self._active = None
            self._saved = {}
            waiters, self._waiters = self._waiters, []
        for loop, waiter in waiters:
            if not loop.is_closed():
                loop.call_soon_threadsafe(_wake, waiter)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


PROCESS_ENVIRONMENT = EnvironmentLease()
