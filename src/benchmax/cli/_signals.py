"""SIGTERM handled like Ctrl-C while a command runs (``kill``, ``timeout``, container stops)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

__all__ = ["TerminationSignals", "terminate_like_interrupt"]


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
    signals: TerminationSignals | None = None,
) -> Iterator[TerminationSignals]:
    """Inside the block, SIGTERM does what SIGINT does at that moment.

    The block gets ``signals`` (a new record when not given). Pass one made before the
    ``with`` when an interrupt while entering the block must still find it.

    SIGINT's current handler is called: under ``asyncio.run`` that cancels the main task
    (the run stops cleanly and ``KeyboardInterrupt`` comes out of ``asyncio.run``);
    otherwise Python's default raises ``KeyboardInterrupt``. Outside the main thread
    nothing changes (signal handlers can only be set there).
    """
    if signals is None:
        signals = TerminationSignals()
    if threading.current_thread() is not threading.main_thread():
        yield signals
        return

    def on_terminate(signum: int, frame: FrameType | None) -> None:
        signals.received.append(signum)
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler):
            handler(signal.SIGINT, frame)
        else:
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_terminate)
    try:
        yield signals
    finally:
        signal.signal(signal.SIGTERM, previous)
