"""Making a local Ray instance go with the process that started it, even after ``kill -9``.

Ray ends its GCS server and raylet when the driver dies, but the agents the raylet starts
(``DashboardAgent``, ``RuntimeEnvAgent``, about 190 MB each) outlive them. So before a run
starts a local instance, ``reaping_local_ray()`` starts a small guard process (this file run
as a script, standard library only, in its own session so a terminal's Ctrl-C to the driver's
process group leaves it alone). The driver holds the write end of the guard's stdin.

While the driver lives, the guard records every process descended from it but those it ran
before the guard (Ray's processes: they are its only new children), with each one's start
time, once a second. When its stdin reaches end of file without the word ``done`` (the
driver died: the kernel closes a dead process's pipes), it sends SIGTERM to every recorded
process still alive with the same start time (never one whose pid was reused) and SIGKILL
``REAP_GRACE_SECONDS`` later. A driver that ends normally writes ``done`` after
``ray.shutdown()`` and the guard exits. Linux only (``/proc``); elsewhere nothing is guarded.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["REAP_GRACE_SECONDS", "reaping_local_ray"]

REAP_GRACE_SECONDS = 2.0
"""Seconds between SIGTERM and SIGKILL for the processes of a dead driver."""

_SCAN_SECONDS = 1.0
_PROC = Path("/proc")


def _stat(pid: int) -> tuple[int, int] | None:
    """``(parent pid, start time in clock ticks)`` of ``pid``; ``None`` when it is gone."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except (OSError, ValueError):
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ")".
    fields = text[text.rfind(")") + 2 :].split()
    try:
        return int(fields[1]), int(fields[19])
    except (IndexError, ValueError):
        return None


def _table() -> dict[int, tuple[int, int]]:
    """Every live process: ``{pid: (parent pid, start time)}``."""
    table = {}
    for entry in _PROC.iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None:
                table[int(entry.name)] = stat
    return table


def _descendants(roots: set[int], table: dict[int, tuple[int, int]]) -> dict[int, int]:
    """The processes of ``table`` below any of ``roots``: ``{pid: start time}``."""
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found: dict[int, int] = {}
    stack = list(roots)
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found[child] = table[child][1]
                stack.append(child)
    return found


def _guard(driver: int, earlier: set[int]) -> None:
    """The guard's loop (see the module docstring); returns when its work is done.

    ``earlier``: the driver's processes from before the guard (never ended, nor theirs).
    """
    me = os.getpid()
    recorded: dict[int, int] = {}
    received = b""
    while True:
        readable, _, _ = select.select([sys.stdin.buffer], [], [], _SCAN_SECONDS)
        if readable:
            chunk = os.read(sys.stdin.fileno(), 64)
            received += chunk
            if not chunk:
                break
            continue
        table = _table()
        # What the driver ran before the guard, and their children, are not Ray's.
        skipped = earlier | set(_descendants(earlier, table)) | {me}
        below = _descendants({driver}, table)
        recorded.update((pid, start) for pid, start in below.items() if pid not in skipped)
    if b"done" in received:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = [pid for pid, start in recorded.items() if (_stat(pid) or (0, -1))[1] == start]
        for pid in alive:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        if not alive:
            return
        deadline = time.monotonic() + REAP_GRACE_SECONDS
        while sig == signal.SIGTERM and time.monotonic() < deadline:
            if all((_stat(pid) or (0, -1))[1] != recorded[pid] for pid in alive):
                return
            time.sleep(0.1)


@contextlib.contextmanager
def reaping_local_ray() -> Iterator[None]:
    """Inside the block, the processes this one starts are ended if it dies (``kill -9``).

    Start the local Ray instance inside the block and shut it down before leaving it. A
    no-op where ``/proc`` does not exist.
    """
    if not (_PROC / "self" / "stat").exists():
        yield
        return
    driver = os.getpid()
    earlier = [str(pid) for pid in _descendants({driver}, _table())]
    guard = subprocess.Popen(
        [sys.executable, "-I", "-S", str(Path(__file__).resolve()), str(driver), *earlier],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    assert guard.stdin is not None
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            guard.stdin.write(b"done")
            guard.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            guard.wait(5)


if __name__ == "__main__":
    _guard(int(sys.argv[1]), {int(pid) for pid in sys.argv[2:]})
