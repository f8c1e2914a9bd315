"""One capture endpoint per event loop, shared by the rollouts in flight on it.

``loop_endpoint()`` starts the running loop's endpoint for the first rollout that enters
and stops it when the last one leaves, so nothing listens between runs, a loop that ends
leaves no server behind, and thousands of concurrent rollouts share one port.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from benchmax.capture._endpoint import CaptureEndpoint

__all__ = ["loop_endpoint"]


class _Shared:
    __slots__ = ("endpoint", "lock", "users")

    def __init__(self) -> None:
        self.endpoint: CaptureEndpoint | None = None
        self.lock = asyncio.Lock()
        self.users = 0


_BY_LOOP: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Shared] = (
    weakref.WeakKeyDictionary()
)


@asynccontextmanager
async def loop_endpoint() -> AsyncIterator[CaptureEndpoint]:
    """The running loop's capture endpoint (127.0.0.1, a free port), held for the block."""
    shared = _BY_LOOP.setdefault(asyncio.get_running_loop(), _Shared())
    shared.users += 1
    try:
        async with shared.lock:
            if shared.endpoint is None:
                shared.endpoint = await CaptureEndpoint().start()
            endpoint = shared.endpoint
        yield endpoint
    finally:
        shared.users -= 1
        if shared.users == 0:
            async with shared.lock:
                if shared.users == 0 and shared.endpoint is not None:
                    stopping, shared.endpoint = shared.endpoint, None
                    await stopping.stop()
