"""Noticing a hook that blocks the event loop (a synchronous sleep or CPU loop inside
``async def``), which stops every timeout and cancellation of the run from working.

A daemon thread asks the loop to mark a heartbeat every ``threshold / 4`` seconds; when no
heartbeat came for ``threshold`` seconds, it looks at the loop thread's stack and logs one
warning naming the innermost frame outside benchmax, the standard library and installed packages
(the hook; installed scripts such as the ``benchmax`` command count as installed), once per
hook. Frames of code without a source file (``<frozen importlib._bootstrap>``,
``<string>``) are never the hook: a slow import on the loop is no hook's fault.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import threading
import time
from collections.abc import AsyncIterator

from benchmax._user_code import outward, user_location

__all__ = ["BLOCKED_LOOP_SECONDS", "blocking_hook", "watching_the_loop"]

BLOCKED_LOOP_SECONDS = 2.0
"""How long the loop may stay blocked before the run warns."""

_LOGGER = logging.getLogger("benchmax.runner")


@contextlib.asynccontextmanager
async def watching_the_loop(threshold: float = BLOCKED_LOOP_SECONDS) -> AsyncIterator[set[str]]:
    """Watch the running loop inside the block; yields the hooks warned about so far."""
    loop = asyncio.get_running_loop()
    loop_thread = threading.get_ident()
    beat = [time.monotonic()]
    warned: set[str] = set()
    stop = threading.Event()

    def mark() -> None:
        beat[0] = time.monotonic()

    def watch() -> None:
        while not stop.wait(threshold / 4):
            try:
                loop.call_soon_threadsafe(mark)
            except RuntimeError:  # the loop closed
                return
            blocked = time.monotonic() - beat[0]
            if blocked < threshold:
                continue
            hook = blocking_hook(loop_thread)
            if hook is not None and hook not in warned:
                warned.add(hook)
                _LOGGER.warning(
                    "the event loop has been blocked for %.1f s by %s: a synchronous sleep or "
                    "loop inside async def stops timeouts and cancellation (await, or use "
                    "asyncio.to_thread)",
                    blocked,
                    hook,
                )

    thread = threading.Thread(target=watch, name="benchmax-loop-watch", daemon=True)
    thread.start()
    try:
        yield warned
    finally:
        stop.set()


def blocking_hook(thread: int) -> str | None:
    """What thread ``thread`` (an ident) runs now: ``qualname (file:line)`` of its innermost
    frame outside benchmax, the standard library and installed packages (``None``: none)."""
    return user_location(outward(sys._current_frames().get(thread)))
