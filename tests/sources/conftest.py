"""Fixtures for the sources tests: OpenEnv servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest


@pytest.fixture
async def serve_openenv() -> AsyncIterator[Callable[[Any], Awaitable[str]]]:
    """``url = await serve_openenv(app)``: serve an openenv-core FastAPI app with uvicorn on
    127.0.0.1 (an ephemeral port) in this event loop; stopped after the test."""
    import uvicorn

    servers: list[tuple[Any, asyncio.Task[None]]] = []

    async def serve(app: Any) -> str:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        server = uvicorn.Server(uvicorn.Config(app, log_level="critical", lifespan="on"))
        task = asyncio.create_task(server.serve(sockets=[sock]))
        async with asyncio.timeout(60):
            while not server.started:
                if task.done():
                    task.result()
                await asyncio.sleep(0.02)
        servers.append((server, task))
        return f"http://127.0.0.1:{port}"

    yield serve
    for server, _ in servers:
        server.should_exit = True
    for _, task in servers:
        await task
