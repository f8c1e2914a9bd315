"""One capture endpoint per event loop (and address), shared by the rollouts in flight on it.

``loop_endpoint()`` starts the running loop's endpoint for the first rollout that enters
and stops it when the last one leaves, so nothing listens between runs, a loop that ends
leaves no server behind, and thousands of concurrent rollouts share one port. Rollouts
that ask for another ``CaptureAddress`` (a Harbor environment whose agents run in
Docker) share an endpoint of their own.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from benchmax.capture._address import CaptureAddress
from benchmax.capture._endpoint import CaptureEndpoint

__all__ = ["loop_endpoint"]


class _Shared:
    __slots__ = ("endpoint", "lock", "users")

    def __init__(self) -> None:
        self.endpoint: CaptureEndpoint | None = None
        self.lock = asyncio.Lock()
        self.users = 0


_BY_LOOP: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[CaptureAddress, _Shared]] = (
    weakref.WeakKeyDictionary()
)
_LOOPBACK = CaptureAddress()


@asynccontextmanager
async def loop_endpoint(
    address: CaptureAddress = _LOOPBACK,
) -> AsyncIterator[CaptureEndpoint]:
    """The running loop's capture endpoint for ``address`` (by default 127.0.0.1; a free
    port), held for the block. ``TypeError`` for an ``address`` that is no
    ``CaptureAddress``; ``OSError`` when the endpoint cannot listen there."""
    if not isinstance(address, CaptureAddress):
        raise TypeError(
            "loop_endpoint's address must be a CaptureAddress(bind, host), such as"
            f" CaptureAddress('0.0.0.0', 'host.docker.internal'), not {address!r}"
        )
    by_address = _BY_LOOP.setdefault(asyncio.get_running_loop(), {})
    shared = by_address.setdefault(address, _Shared())
    shared.users += 1
    try:
        async with shared.lock:
            if shared.endpoint is None:
                shared.endpoint = await CaptureEndpoint(
                    host=address.bind, advertised_host=address.host
                ).start()
            endpoint = shared.endpoint
        yield endpoint
    finally:
        shared.users -= 1
        if shared.users == 0:
            async with shared.lock:
                if shared.users == 0 and shared.endpoint is not None:
                    stopping, shared.endpoint = shared.endpoint, None
                    await stopping.stop()
