"""A real MCP server for the MCPServer tests, written with the SDK's server API.

``python mcp_test_server.py`` serves over stdio; ``python mcp_test_server.py http PORT``
serves streamable HTTP on 127.0.0.1:PORT at ``/mcp``. With ``MCP_TEST_MARKS`` set to a
directory, tools leave marker files there (``started-<tool>-<pid>-<call>``, ``cancelled-...``)
so tests can see a call begin (to kill the server mid-call) and be cancelled.
``MCP_TEST_TOKEN`` makes the HTTP server require ``Authorization: Bearer <token>``.
``MCP_TEST_START_DELAY`` (seconds) makes it start that much later, like a server whose
imports are slow. ``MCP_TEST_DAEMON`` set to a file path makes it start a daemon first
(fork, ``setsid``, fork again, close every descriptor) that writes its pid there and sleeps.
"""

from __future__ import annotations

import asyncio
import base64
import os
import sys
import time
import uuid
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ImageContent, TextContent, ToolAnnotations
from pydantic import BaseModel

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n-test-image-").decode()
READ_ONLY = ToolAnnotations(read_only_hint=True)

server = MCPServer("benchmax-test")
_count = 0


def _mark(kind: str, tool: str) -> None:
    marks = os.environ.get("MCP_TEST_MARKS")
    if marks:
        Path(marks, f"{kind}-{tool}-{os.getpid()}-{uuid.uuid4().hex[:8]}").touch()


@server.tool(annotations=READ_ONLY)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def count() -> int:
    """Count calls made to this server process."""
    global _count
    _count += 1
    return _count


@server.tool(annotations=READ_ONLY)
def pid() -> int:
    """The server's process id."""
    return os.getpid()


async def _slow(tool: str, seconds: float) -> str:
    _mark("started", tool)
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        _mark("cancelled", tool)
        raise
    return f"{tool} done"


@server.tool(annotations=READ_ONLY)
async def slow_read(seconds: float) -> str:
    """Wait, then answer (read-only: safe to retry)."""
    return await _slow("slow_read", seconds)


@server.tool()
async def slow_write(seconds: float) -> str:
    """Wait, then answer (may change state: never retried)."""
    return await _slow("slow_write", seconds)


@server.tool()
def block(seconds: float) -> str:
    """Block the whole server (a synchronous sleep: cancellation cannot reach it)."""
    _mark("started", "block")
    time.sleep(seconds)
    return "block done"


@server.tool()
def fail(message: str) -> str:
    """Report a tool error."""
    raise ToolError(message)


@server.tool()
def picture() -> list[TextContent | ImageContent]:
    """A caption and an image."""
    return [
        TextContent(type="text", text="a test image"),
        ImageContent(type="image", data=PNG, mime_type="image/png"),
    ]


class Point(BaseModel):
    x: int
    y: int


@server.tool()
def point() -> Point:
    """A structured result."""
    return Point(x=3, y=4)


@server.tool()
def crash() -> str:
    """Exit the server process mid-call."""
    os._exit(3)


def _start_daemon(pid_file: str) -> None:
    """The classic daemon: it leaves the server's session and closes every pipe."""
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.closerange(0, 1024)
            Path(pid_file + ".tmp").write_text(str(os.getpid()))
            os.rename(pid_file + ".tmp", pid_file)
            time.sleep(600)
        os._exit(0)
    os.wait()
    while not os.path.exists(pid_file):
        time.sleep(0.01)


def main() -> None:
    time.sleep(float(os.environ.get("MCP_TEST_START_DELAY", "0")))
    if os.environ.get("MCP_TEST_DAEMON"):
        _start_daemon(os.environ["MCP_TEST_DAEMON"])
    if sys.argv[1:2] == ["http"]:
        token = os.environ.get("MCP_TEST_TOKEN")
        app = server.streamable_http_app()
        if token:
            app.add_middleware(_RequireBearer, token=token)
        import uvicorn

        uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
    else:
        server.run()


class _RequireBearer:
    def __init__(self, app, token: str) -> None:  # type: ignore[no-untyped-def]
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope, receive, send) -> None:  # type: ignore[no-untyped-def]
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != (
            self.expected
        ):
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
        await self.app(scope, receive, send)


if __name__ == "__main__":
    main()
