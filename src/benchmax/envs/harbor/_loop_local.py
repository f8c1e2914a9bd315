"""One asyncio primitive per running event loop.

asyncio locks and semaphores bind to the loop that first waits on them, so an
object used from successive loops (e.g. repeated ``asyncio.run`` calls) keeps a
separate instance per loop, dropped when that loop is garbage collected.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable

__all__ = ["LoopLocal"]


class LoopLocal[T]:
    """Lazily creates and caches ``factory()`` for each running event loop."""

    def __init__(self, factory: Callable[[], T]) -> None:
        self._factory = factory
        self._lock = threading.Lock()
        self._values: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, T] = (
            weakref.WeakKeyDictionary()
        )

    def __reduce__(self) -> tuple[type[LoopLocal[T]], tuple[Callable[[], T]]]:
        # Per-loop instances never travel: a copy starts with none.
        return (type(self), (self._factory,))

    def get(self) -> T:
        """Return the instance belonging to the running loop, creating it if needed."""
        loop = asyncio.get_running_loop()
        with self._lock:
            value = self._values.get(loop)
            if value is None:
                value = self._factory()
                self._values[loop] = value
            return value
