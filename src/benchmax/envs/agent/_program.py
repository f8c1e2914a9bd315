"""Running an agent program: its own session, bounded output, nothing left behind.

The program starts in a session (and process group) of its own, so everything it starts
belongs to it. It gets the task on stdin (closed after), its stdout and stderr are read
as they come (stdout up to ``max_stdout`` bytes: more stops it; stderr's first
``max_stderr`` bytes are kept, the rest read and dropped, so a chatty program never
blocks on a full pipe nor fills memory). It runs until it exits or ``stop`` is set.
Whatever way it ends (exit, stop, a deadline cancelling the caller), what is left of its
session, any process that left the session (a daemon) but still holds its stdout or
stderr pipe, and (on Linux) any process of this user still carrying the program's
``BENCHMAX_ROLLOUT_PROCESS`` marker in its environment (a daemon that also closed those
pipes) gets SIGTERM, then SIGKILL after ``TERM_GRACE`` seconds; marked processes are then
killed until none is left (a daemon forking as it dies), and the program is reaped: no
process of it outlives the rollout. (One that cleared its environment, ``env -i``, or
changed its user cannot be told from any other process and escapes.)
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from benchmax._process_sessions import (
    KILL,
    marked_processes,
    pipe_holders,
    running,
    session_members,
    signal_session,
    wait_until,
)

__all__ = ["MARKER_VARIABLE", "ProgramEnd", "TERM_GRACE", "run_program"]

logger = logging.getLogger("benchmax.agents")

TERM_GRACE: Final = 2.0
"""Seconds between SIGTERM and SIGKILL of what is left of a program's session."""
MARKER_VARIABLE: Final = "BENCHMAX_ROLLOUT_PROCESS"
"""The environment variable each program gets a random, non-secret value in (its own per
run): what its processes are found by once they left its session and pipes."""
_CHUNK: Final = 1 << 16
_POLL: Final = 0.005
_POLL_MAX: Final = 0.05


@dataclass(frozen=True, slots=True)
class ProgramEnd:
    """How a program ended: ``exit_code`` (negative: the signal that ended it; ``None``
    when it was stopped before exiting), its ``stdout`` and ``stderr`` (as far as kept,
    decoded as UTF-8 with replacement), whether its stdout went over the limit
    (``flooded``), whether it was ``stopped`` from outside, and whether processes it
    started were still running when it exited (``left_processes``; they were killed)."""

    exit_code: int | None
    stdout: str
    stderr: str
    flooded: bool
    stopped: bool
    left_processes: bool


async def run_program(
    argv: Sequence[str],
    *,
    stdin: bytes,
    env: Mapping[str, str],
    cwd: Path,
    max_stdout: int,
    max_stderr: int,
    stop: asyncio.Event,
) -> ProgramEnd:
    """Run ``argv`` to its end (module docstring). Raises ``OSError`` when it cannot
    start (no such program, not executable)."""
    loop = asyncio.get_running_loop()
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    inodes = (os.fstat(out_read).st_ino, os.fstat(err_read).st_ino)
    marker = secrets.token_hex(16)
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=subprocess.PIPE,
            stdout=out_write,
            stderr=err_write,
            env={**env, MARKER_VARIABLE: marker},
            cwd=cwd,
            start_new_session=True,
        )
    except BaseException:
        os.close(out_read)
        os.close(err_read)
        raise
    finally:  # the program holds the write ends now: EOF comes when all its holders exit
        os.close(out_write)
        os.close(err_write)
    leader = process.pid
    flooded = asyncio.Event()
    stdout = bytearray()
    stderr = bytearray()
    transports: list[asyncio.ReadTransport] = []
    tasks: list[asyncio.Task[object]] = []
    readers: list[asyncio.StreamReader] = []
    exit_code: int | None = None
    left = False
    try:
        for fd in (out_read, err_read):
            reader = asyncio.StreamReader()
            pipe = os.fdopen(fd, "rb", buffering=0)
            try:
                transport, _ = await loop.connect_read_pipe(
                    functools.partial(asyncio.StreamReaderProtocol, reader), pipe
                )
            except BaseException:
                pipe.close()
                raise
            transports.append(transport)
            readers.append(reader)
        tasks = [
            asyncio.ensure_future(_feed(process, stdin)),
            asyncio.ensure_future(_collect(readers[0], stdout, max_stdout, flooded)),
            asyncio.ensure_future(_collect(readers[1], stderr, max_stderr, None)),
        ]
        exited = asyncio.ensure_future(_exit(process))
        stopped = asyncio.ensure_future(stop.wait())
        overflowed = asyncio.ensure_future(flooded.wait())
        try:
            await asyncio.wait((exited, stopped, overflowed), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in (stopped, overflowed):
                waiter.cancel()
            if not exited.done():
                exited.cancel()
        exit_code = process.returncode
        if exit_code is not None and not flooded.is_set():
            left = bool(session_members(leader))
            if not left:  # let the pipes drain: the program's last words
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(TERM_GRACE):
                        await asyncio.gather(*tasks[1:])
                # still open: a process that left the session (a daemon) holds them
                left = not all(reader.at_eof() for reader in readers) and bool(pipe_holders(inodes))
    finally:
        pipes_open = len(readers) < 2 or not all(reader.at_eof() for reader in readers)
        ended = _end_session(process, argv[0], inodes if pipes_open else (), marker)
        # Its session and pipes were found empty: anything signalled now carried the marker
        # (a daemon that closed its pipes), still running after the program exited.
        escaped = await asyncio.shield(ended)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for read_transport in transports:
            read_transport.close()
        for fd, opened in ((out_read, len(transports) > 0), (err_read, len(transports) > 1)):
            if not opened:
                with contextlib.suppress(OSError):
                    os.close(fd)
    return ProgramEnd(
        exit_code=exit_code,
        stdout=bytes(stdout[:max_stdout]).decode("utf-8", "replace"),
        stderr=bytes(stderr).decode("utf-8", "replace"),
        flooded=flooded.is_set(),
        stopped=stop.is_set() and exit_code is None,
        left_processes=left or (escaped and exit_code is not None and not flooded.is_set()),
    )


async def _exit(process: asyncio.subprocess.Process) -> None:
    """Until the program itself exits (``process.wait()`` also waits for its pipes to
    close, which a child that inherited them may hold open)."""
    pause = _POLL
    while process.returncode is None:
        await asyncio.sleep(pause)
        pause = min(pause * 2, _POLL_MAX)


async def _feed(process: asyncio.subprocess.Process, data: bytes) -> None:
    pipe = process.stdin
    assert pipe is not None
    with contextlib.suppress(OSError, RuntimeError):
        pipe.write(data)
        await pipe.drain()
    with contextlib.suppress(OSError, RuntimeError):
        pipe.close()


async def _collect(
    pipe: asyncio.StreamReader,
    into: bytearray,
    limit: int,
    over: asyncio.Event | None,
) -> None:
    """Read ``pipe`` to its end, keeping the first ``limit`` bytes; with ``over``, set it
    (and stop reading) once more than ``limit`` arrived."""
    with contextlib.suppress(OSError):
        while chunk := await pipe.read(_CHUNK):
            room = limit - len(into)
            if room > 0:
                into += chunk[:room]
            if len(chunk) > room and over is not None:
                over.set()
                return


async def _end_session(
    process: asyncio.subprocess.Process, label: str, pipes: Collection[int], marker: str
) -> bool:
    """SIGTERM what is left of the program's session, the processes still holding its
    ``pipes`` (inodes; a daemon that left the session) and those carrying its ``marker``,
    SIGKILL them after ``TERM_GRACE``, kill marked processes until none is left, and reap
    the program; whether any process was signalled. In the usual case (the program exited
    and left nothing) one scan of each kind."""
    leader = process.pid
    outside: set[int] = set()  # signalled outside the session: waited for until gone

    def holders() -> list[int]:
        held = (pipe_holders(pipes) or []) if pipes else []
        return held + (marked_processes(MARKER_VARIABLE, marker) or [])

    def signal_all(signum: int) -> bool:
        sent = signal_session(leader, signum)
        for pid in holders():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)
                outside.add(pid)
                sent = True
        return sent

    signalled = signal_all(signal.SIGTERM)
    if signalled:
        await wait_until(
            lambda: (
                process.returncode is not None and not session_members(leader) and not holders()
            ),
            TERM_GRACE,
        )
        if signal_all(KILL):
            logger.warning(
                "agents.program_killed program=%s pid=%d: its session (or a process holding"
                " its output or its marker) was still running %gs after SIGTERM",
                label,
                leader,
                TERM_GRACE,
            )
        outside.update(await _kill_marked(label, marker))
        # A killed process stops counting as marked once it let go of its memory, a moment
        # before it is gone: wait for that moment, so nothing of it runs after the rollout.
        await wait_until(lambda: not running(outside), TERM_GRACE)
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(TERM_GRACE):
            await process.wait()
    return signalled


async def _kill_marked(label: str, marker: str) -> set[int]:
    """SIGKILL the processes carrying ``marker`` until a scan finds none (one forking as
    it was killed leaves children behind), for at most ``TERM_GRACE`` seconds; the pids
    killed."""
    deadline = time.monotonic() + TERM_GRACE
    killed: set[int] = set()
    pause = _POLL
    while marked := marked_processes(MARKER_VARIABLE, marker):
        if time.monotonic() > deadline:
            logger.warning(
                "agents.program_escaped program=%s pids=%s: processes carrying its marker"
                " were still being started %gs after SIGKILL",
                label,
                marked[:10],
                TERM_GRACE,
            )
            return killed
        for pid in marked:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, KILL)
                killed.add(pid)
        await asyncio.sleep(pause)
        pause = min(pause * 2, _POLL_MAX)
    return killed
