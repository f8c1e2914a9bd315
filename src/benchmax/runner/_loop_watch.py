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
import sysconfig
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from types import FrameType

__all__ = ["BLOCKED_LOOP_SECONDS", "blocking_hook", "watching_the_loop"]

BLOCKED_LOOP_SECONDS = 2.0
"""How long the loop may stay blocked before the run warns."""

_LOGGER = logging.getLogger("benchmax.runner")
_BENCHMAX = str(Path(__file__).resolve().parents[1])
_LIBRARIES = tuple(
    {
        str(Path(sysconfig.get_paths()[name]).resolve())
        for name in ("stdlib", "purelib", "platlib", "scripts")  # scripts: the `benchmax` command
    }
)


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


_BY_VALUE = "<dynamic-code>"
"""The file name of code cloudpickle carried by value (a bundle's, a Ray worker's): user
code, so it is blamed, unlike other generated code (``<string>``, ``<frozen ...>``)."""


def blocking_hook(thread: int) -> str | None:
    """What thread ``thread`` (an ident) runs now: ``qualname (file:line)`` of its innermost
    frame outside benchmax, the standard library and installed packages (``None``: none)."""
    return _hook_of(sys._current_frames().get(thread))


def _hook_of(frame: FrameType | None) -> str | None:
    """``qualname (file:line)`` of the innermost frame outside benchmax and the stdlib
    (frames of frozen or generated code, named ``<...>``, skipped, except code carried
    by value, ``<dynamic-code>``)."""
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename.startswith("<") and filename != _BY_VALUE:
            frame = frame.f_back
            continue
        try:
            resolved = str(Path(filename).resolve())
        except OSError:
            resolved = filename
        # "<frozen runpy>" and the like are the standard library's frozen modules.
        if not filename.startswith("<frozen ") and not resolved.startswith(
            (_BENCHMAX, *_LIBRARIES)
        ):
            return f"{frame.f_code.co_qualname} ({filename}:{frame.f_lineno})"
        frame = frame.f_back
    return None
