"""The stdio transport of an MCP session: a server process that never outlives it.

The server starts in a session (and process group) of its own (``setsid``), so everything
it starts belongs to that session: children it spawns, and the server a launcher forks
before exiting. Closing, whatever the caller's deadlines (``tool_timeout`` included),
runs to its own bound of at most ``CLOSE_DEADLINE`` seconds:

1. the server's stdin is closed (the MCP shutdown sequence) and it is given
   ``EOF_GRACE`` seconds to exit;
2. whatever of its session is still alive then (the server itself, its children, a
   launcher's server that ignores the end of its input), and on Linux any process still
   carrying the server's ``BENCHMAX_ROLLOUT_PROCESS`` marker in its environment (a daemon
   it started that double-forked, called ``setsid`` and closed its pipes), gets SIGTERM,
   and ``TERM_GRACE`` seconds later SIGKILL; marked processes are then killed until none
   is left (``benchmax._process_sessions.end_processes``, as for ``AgentEnv`` programs);
3. the server is reaped (``REAP_GRACE``).

Should the close itself be cut short (the event loop ending, a second Ctrl-C), the
session and the marked processes still left are sent SIGKILL on the way out: no process
of it survives either way. Members are found by their session id in ``/proc`` (Linux);
elsewhere the process group is signalled (on Windows, which has neither, the server
process alone). A process that cleared its environment or changed its user as it left
the session escapes (docs/agents.md).

Lines the server writes are JSON-RPC messages; one that is not is given to the MCP
client as the parse error (as the SDK's own transport does). Lines may be any length.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Literal

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage
from mcp.types import jsonrpc_message_adapter

from benchmax._process_sessions import (
    MARKER_VARIABLE,
    end_processes,
    kill_now,
    new_marker,
    session_members,
    wait_until,
)

__all__ = ["CLOSE_DEADLINE", "EOF_GRACE", "REAP_GRACE", "TERM_GRACE", "stdio_transport"]

logger = logging.getLogger("benchmax.tools.mcp")

EOF_GRACE = 2.0
"""Seconds a server has to exit once its stdin is closed."""
TERM_GRACE = 2.0
"""Seconds between SIGTERM and SIGKILL of what is left of the server's session (and the
most the marked processes' final sweep takes after)."""
REAP_GRACE = 1.0
"""Seconds for the event loop to see the killed server exit."""
CLOSE_DEADLINE = EOF_GRACE + 2 * TERM_GRACE + REAP_GRACE
"""The most a close takes (seconds)."""

_CHUNK = 1 << 16

type _Streams = tuple[
    MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]
]


@asynccontextmanager
async def stdio_transport(
    command: tuple[str, ...],
    env: Mapping[str, str] | None,
    cwd: str | None,
    stderr: Literal["inherit", "discard"],
    label: str,
) -> AsyncIterator[_Streams]:
    """Start ``command`` in a new session and yield the MCP client's streams over its
    stdin/stdout; on exit, stop it and every process of its session (module docstring).

    Raises ``OSError`` when the command cannot be started.
    """
    marker = new_marker()
    process = await asyncio.create_subprocess_exec(
        *command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=None if stderr == "inherit" else subprocess.DEVNULL,
        env=get_default_environment() | dict(env or {}) | {MARKER_VARIABLE: marker},
        cwd=cwd,
        start_new_session=True,
    )
    leader = process.pid
    stopped = False
    try:
        incoming, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_stream, outgoing = anyio.create_memory_object_stream[SessionMessage](0)
        async with anyio.create_task_group() as pipes:
            pipes.start_soon(_read, process, incoming)
            pipes.start_soon(_write, process, outgoing, incoming)
            try:
                yield read_stream, write_stream
            finally:
                with anyio.CancelScope(shield=True):
                    await _stop(process, label, marker)
                    stopped = True
                pipes.cancel_scope.cancel()
                for stream in (read_stream, write_stream, incoming, outgoing):
                    stream.close()
    finally:
        if not stopped:  # the close was cut short: kill what is left, now
            kill_now(leader, marker)


async def _read(
    process: asyncio.subprocess.Process,
    incoming: MemoryObjectSendStream[SessionMessage | Exception],
) -> None:
    """Pass the server's lines on; once the session stops taking them (it is closing),
    read on and drop them, so a server writing a long reply is not stuck on a full pipe
    instead of seeing its stdin end."""
    stdout = process.stdout
    assert stdout is not None
    buffer = b""
    taking = True
    async with incoming:
        with contextlib.suppress(OSError):
            while chunk := await stdout.read(_CHUNK):
                if not taking:
                    continue
                *lines, buffer = (buffer + chunk).split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    try:
                        await incoming.send(_parsed(line))
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        taking, buffer = False, b""
                        break


def _parsed(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as error:
        return error


async def _write(
    process: asyncio.subprocess.Process,
    outgoing: MemoryObjectReceiveStream[SessionMessage],
    incoming: MemoryObjectSendStream[SessionMessage | Exception],
) -> None:
    stdin = process.stdin
    assert stdin is not None
    try:
        async with outgoing:
            async for message in outgoing:
                text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                stdin.write(text.encode() + b"\n")
                await stdin.drain()
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        # The server stopped reading: end the session rather than hang a request.
        await incoming.aclose()


async def _stop(process: asyncio.subprocess.Process, label: str, marker: str) -> None:
    leader = process.pid
    launched = process.returncode is not None  # the leader was a launcher, already gone
    stdin = process.stdin
    if stdin is not None:
        with contextlib.suppress(OSError, RuntimeError):
            stdin.close()
    if launched:  # the server it forked has its grace to see the end of its input
        await wait_until(lambda: not session_members(leader), EOF_GRACE)
    else:  # what the server leaves behind once it has exited is not waited for
        await wait_until(lambda: process.returncode is not None, EOF_GRACE)
    sweep = await end_processes(
        leader, lambda: process.returncode is not None, marker, grace=TERM_GRACE
    )
    if sweep.killed:
        logger.warning(
            "mcp.server_killed server=%s pid=%d: its session (or a process carrying its"
            " marker) was still running %gs after SIGTERM",
            label,
            leader,
            TERM_GRACE,
        )
    if sweep.escaping:
        logger.warning(
            "mcp.server_escaped server=%s pids=%s: processes carrying its marker were still"
            " being started %gs after SIGKILL",
            label,
            list(sweep.escaping),
            TERM_GRACE,
        )
    try:
        async with asyncio.timeout(REAP_GRACE):
            await process.wait()
    except TimeoutError:
        logger.warning(
            "mcp.server_unreaped server=%s pid=%d: killed, not yet seen to exit", label, leader
        )
