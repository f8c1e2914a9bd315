"""Fixtures shared by the whole test suite."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest

from benchmax.testing import MockModelServer, Policy, echo


@pytest.fixture
async def mock_server() -> AsyncIterator[MockModelServer]:
    """A started ``MockModelServer`` answering with ``echo``.

    Swap the policy with ``mock_server.policy = scripted([...])``; queue faults with
    ``mock_server.inject(...)``. Stopped (every connection closed) after the test.
    """
    async with MockModelServer(echo) as server:
        yield server


@pytest.fixture
async def make_mock_server() -> AsyncIterator[Callable[..., Awaitable[MockModelServer]]]:
    """Factory for extra started servers: ``server = await make_mock_server(policy)``.

    Keyword arguments go to ``MockModelServer``; every server is stopped after the test.
    """
    servers: list[MockModelServer] = []

    async def make(policy: Policy = echo, **options: object) -> MockModelServer:
        server = MockModelServer(policy, **options)  # type: ignore[arg-type]
        await server.start()
        servers.append(server)
        return server

    yield make
    for server in reversed(servers):
        await server.stop()


@pytest.fixture
async def http_client() -> AsyncIterator[httpx.AsyncClient]:
    """A plain ``httpx.AsyncClient`` for http:// URLs (no TLS setup, so it is cheap)."""
    async with httpx.AsyncClient(verify=False, timeout=10) as client:
        yield client
