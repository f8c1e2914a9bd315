"""The MCP server of ``mcp_tools.py``: one read-only ``add`` tool, written with the SDK's
server API. ``python _mcp_server.py`` serves stdio; ``python _mcp_server.py http`` serves
streamable HTTP on a free 127.0.0.1 port and prints ``listening on URL`` when ready."""

from __future__ import annotations

import socket
import sys

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("bench", log_level="WARNING")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def main() -> None:
    if sys.argv[1:] != ["http"]:
        server.run()
        return
    import uvicorn

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = uvicorn.Config(
        server.streamable_http_app(), host="127.0.0.1", port=port, log_level="warning"
    )
    http = uvicorn.Server(config)

    async def serve() -> None:
        import asyncio

        task = asyncio.create_task(http.serve())
        while not http.started:
            await asyncio.sleep(0.01)
        print(f"listening on http://127.0.0.1:{port}/mcp", flush=True)
        await task

    import anyio

    anyio.run(serve)


if __name__ == "__main__":
    main()
