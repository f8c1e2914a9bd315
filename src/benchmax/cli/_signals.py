"""SIGTERM handled like Ctrl-C while a command runs (``kill``, ``timeout``, container stops).

A watchdog makes sure a termination signal ends the process even when the event loop is
blocked (a tool sleeping or looping synchronously inside ``async def``, which never lets
the loop see the cancellation): ``STOP_GRACE_SECONDS`` after the signal it interrupts the
main thread again (``KeyboardInterrupt`` inside the blocking code), and as long again after
that it ends the process with ``os._exit(128 + signal)``. Finished groups are already on
disk then (each is written whole and flushed as it completes).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

__all__ = ["STOP_GRACE_SECONDS", "TerminationSignals", "terminate_like_interrupt"]

STOP_GRACE_SECONDS = 5.0
"""How long a stopping run may take before the watchdog interrupts it again, and then
before it ends the process."""


class TerminationSignals:
    """The termination signals received inside ``terminate_like_interrupt``'s block."""

    def __init__(self) -> None:
        self.received: list[int] = []

    @property
    def exit_status(self) -> int:
        """``128 + signal``: 143 after SIGTERM, 130 (Ctrl-C) otherwise."""
        return 128 + (self.received[0] if self.received else signal.SIGINT)


@contextlib.contextmanager
def terminate_like_interrupt(
    signals: TerminationSignals | None = None, *, watchdog: bool = True
) -> Iterator[TerminationSignals]:
    """Inside the block, SIGTERM does what SIGINT does at that moment.

    The block gets ``signals`` (a new record when not given). Pass one made before the
    ``with`` when an interrupt while entering the block must still find it.

    SIGINT's current handler is called: under ``asyncio.run`` that cancels the main task
    (the run stops cleanly and ``KeyboardInterrupt`` comes out of ``asyncio.run``);
    otherwise Python's default raises ``KeyboardInterrupt``. Outside the main thread
    nothing changes (signal handlers can only be set there). ``watchdog=False`` leaves out
    the watchdog, for a command whose SIGINT handler stops it at its own pace (``train``
    finishes the current step).
    """
    if signals is None:
        signals = TerminationSignals()
    if threading.current_thread() is not threading.main_thread():
        yield signals
        return

    left = threading.Event()

    def watch(signum: int) -> None:
        if left.wait(STOP_GRACE_SECONDS):
            return
        main = threading.main_thread().ident
        if main is not None:  # a second interrupt: KeyboardInterrupt in the blocking code
            signal.pthread_kill(main, signal.SIGINT)
        if left.wait(STOP_GRACE_SECONDS):
            return
        sys.stderr.write(
            f"benchmax: still blocked {2 * STOP_GRACE_SECONDS:g} s after the termination "
            "signal (a hook blocks the event loop); exiting, finished groups are kept\n"
        )
        sys.stderr.flush()
        os._exit(128 + signum)

    def on_terminate(signum: int, frame: FrameType | None) -> None:
        signals.received.append(signum)
        if len(signals.received) == 1 and watchdog:
            threading.Thread(
                target=watch, args=(signum,), name="benchmax-stop-watchdog", daemon=True
            ).start()
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler):
            handler(signal.SIGINT, frame)
        else:
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_terminate)
    try:
        yield signals
    finally:
        left.set()
        signal.signal(signal.SIGTERM, previous)
