"""The ``benchmax`` console script: quiet when stopped while the CLI is still importing.

Importing ``benchmax.cli`` (click, rich, every command) takes a noticeable moment, and a
Ctrl-C in it used to print a ``KeyboardInterrupt`` traceback from deep inside an import (a
SIGTERM killed the process by the signal). For that moment both signals end the process
quietly with the documented statuses, 130 and 143. Before the command starts, SIGINT gets
Python's own handler back (``asyncio.run`` and the commands' clean stops rely on it);
SIGTERM keeps the quiet exit outside the commands, which handle it themselves. A signal
the process inherited as ignored (a background job of a shell script) stays ignored.
"""

from __future__ import annotations

import signal
from types import FrameType

__all__ = ["main"]


def _exit_quietly(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def main() -> None:
    """Entry point of the ``benchmax`` script (``benchmax.cli.main`` once imported)."""
    previous_interrupt = signal.getsignal(signal.SIGINT)
    for stop in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(stop) is not signal.SIG_IGN:
            signal.signal(stop, _exit_quietly)
    try:
        from benchmax.cli import main as cli_main
    finally:
        if signal.getsignal(signal.SIGINT) is _exit_quietly:
            signal.signal(signal.SIGINT, previous_interrupt)
    cli_main()
