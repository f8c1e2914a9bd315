"""Real MCP servers for the MCPServer tests: the test server over stdio (an MCPServer
config) or over streamable HTTP (a subprocess on 127.0.0.1), and process/fd probes."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from benchmax.tools import MCPServer

SERVER_SCRIPT = Path(__file__).with_name("mcp_test_server.py")
START = 60.0
"""Seconds a test server may take to start: the machine the suite runs on can be busy,
and importing the SDK alone takes a second or two."""


def stdio_server(marks: Path, **options: Any) -> MCPServer:
    """The test server over stdio, leaving its marker files in ``marks``."""
    options.setdefault("startup_timeout", START)
    options.setdefault("stderr", "discard")
    return MCPServer(
        command=[sys.executable, str(SERVER_SCRIPT)], env={"MCP_TEST_MARKS": str(marks)}, **options
    )


class HttpServer:
    """The test server as a streamable-HTTP subprocess (``url``, ``pid``, ``kill()``)."""

    def __init__(self, process: subprocess.Popen[bytes], port: int) -> None:
        self.process = process
        self.port = port
        self.url = f"http://127.0.0.1:{port}/mcp"

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self) -> None:
        """``kill -9`` the server."""
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(60)


@asynccontextmanager
async def http_server(marks: Path, token: str | None = None) -> AsyncIterator[HttpServer]:
    """Start the test server over HTTP on a free port; stop it (and reap it) after."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "MCP_TEST_MARKS": str(marks)}
    if token is not None:
        env["MCP_TEST_TOKEN"] = token
    process = subprocess.Popen(
        [sys.executable, str(SERVER_SCRIPT), "http", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        await wait_for(lambda: _accepts(port) or process.poll() is not None, START)
        assert process.poll() is None, "the HTTP test server exited at start-up"
        yield HttpServer(process, port)
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(60)


def _accepts(port: int) -> bool:
    with socket.socket() as client:
        return client.connect_ex(("127.0.0.1", port)) == 0


async def wait_for(condition: Callable[[], bool], seconds: float) -> None:
    """Poll ``condition`` every 10 ms until it holds; ``AssertionError`` after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {seconds}s")
        await asyncio.sleep(0.01)


def marked(marks: Path, kind: str, tool: str) -> list[int]:
    """For each call that left ``<kind>-<tool>-<pid>-<call>`` in ``marks``, its server's pid."""
    prefix = f"{kind}-{tool}-"
    return [
        int(p.name[len(prefix) :].split("-")[0])
        for p in marks.iterdir()
        if p.name.startswith(prefix)
    ]


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


RAW_SERVER_SCRIPT = Path(__file__).with_name("mcp_raw_server.py")


def raw_server(marks: Path, *behaviour: str, **options: Any) -> MCPServer:
    """The hand-written stdio server (``mcp_raw_server.py``) with ``behaviour``."""
    options.setdefault("startup_timeout", START)
    options.setdefault("stderr", "discard")
    return MCPServer(
        command=[sys.executable, str(RAW_SERVER_SCRIPT), str(marks), *behaviour], **options
    )


def processes_naming(token: str) -> list[int]:
    """Live processes (zombies excluded) whose command line holds ``token``: a scan of
    the whole process table, so a process that left this one's group or was reparented
    is found too."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if token in command and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def child_processes() -> set[int]:
    """Pids whose parent is this process (zombies included: an unreaped child leaks too)."""
    me = str(os.getpid())
    children: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if fields[1] == me:
            children.add(int(entry.name))
    return children


def loop_trouble(records: list[logging.LogRecord]) -> list[str]:
    """Log lines that betray unclean cancellation: anyio cancel-scope errors, tasks
    destroyed while pending, exceptions never retrieved (the ``asyncio`` logger)."""
    return [
        record.getMessage()
        for record in records
        if record.name == "asyncio" or "cancel scope" in record.getMessage().lower()
    ]


def open_fds() -> dict[int, str]:
    """This process's open file descriptors and what each points to."""
    fds: dict[int, str] = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            fds[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except FileNotFoundError:  # the descriptor listing the directory itself
            continue
    return fds


def fds_leaked(baseline: dict[int, str]) -> dict[int, str]:
    """Descriptors open now that were not open (to the same thing) at ``baseline``."""
    return {fd: target for fd, target in open_fds().items() if baseline.get(fd) != target}
