"""One total deadline per HTTP attempt of a model call.

A deadline covers the whole attempt (connecting, sending, waiting, reading the
body), so a server that drips a byte a second cannot hold a call open past it,
unlike a per-read timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from benchmax._modelhttp.errors import ModelHTTPError

__all__ = ["AttemptTimedOut", "within_deadline"]


class AttemptTimedOut(ModelHTTPError):
    """One HTTP attempt outlived its deadline."""

    def __init__(self, message: str, seconds: float) -> None:
        super().__init__(message)
        self.seconds = seconds


async def within_deadline[T](call: Awaitable[T], seconds: float, message: str) -> T:
    """Await ``call``; :class:`AttemptTimedOut` with ``message`` when it takes
    longer than ``seconds``. A ``TimeoutError`` raised by ``call`` itself passes
    through unchanged."""
    deadline = asyncio.timeout(seconds)
    try:
        async with deadline:
            return await call
    except TimeoutError as error:
        if deadline.expired():
            raise AttemptTimedOut(message, seconds) from error
        raise
