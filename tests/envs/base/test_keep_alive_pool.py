"""benchmax.envs._http_connections.KeepAlivePool: reuse, no cap, expiry, closing."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from benchmax.envs import _http_connections
from benchmax.envs._http_connections import KeepAlivePool, install_keep_alive_pool
from benchmax.testing import MockModelServer

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def pooled_transport(keepalive_expiry: float = 5.0) -> tuple[httpx.AsyncHTTPTransport, Any]:
    limits = httpx.Limits(max_connections=None, keepalive_expiry=keepalive_expiry)
    transport = install_keep_alive_pool(httpx.AsyncHTTPTransport(limits=limits))
    pool = transport._pool
    assert isinstance(pool, KeepAlivePool)
    return transport, pool


async def test_every_request_in_flight_gets_a_connection_then_they_are_reused(
    mock_server: MockModelServer,
) -> None:
    release = asyncio.Event()
    arrived = 0

    async def hold(body: dict[str, Any]) -> str:
        nonlocal arrived
        arrived += 1
        if arrived == 50:
            release.set()
        await release.wait()
        return "ok"

    mock_server.policy = hold
    transport, pool = pooled_transport()
    async with httpx.AsyncClient(transport=transport) as client:
        url = f"{mock_server.base_url}/chat/completions"
        first = await asyncio.wait_for(
            asyncio.gather(*(client.post(url, json=BODY) for _ in range(50))), 10
        )
        assert [r.status_code for r in first] == [200] * 50
        assert pool.connection_count == 50
        mock_server.policy = lambda body: "again"
        second = await asyncio.gather(*(client.post(url, json=BODY) for _ in range(50)))
        assert [r.status_code for r in second] == [200] * 50
        assert pool.connection_count == 50
    assert pool.connection_count == 0
    connections = {r.connection for r in mock_server.requests}
    assert len(connections) == 50


async def test_expired_idle_connections_are_closed(
    mock_server: MockModelServer, make_mock_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_http_connections, "_PRUNE_INTERVAL", 0.0)
    other = await make_mock_server()
    transport, pool = pooled_transport(keepalive_expiry=0.05)
    async with httpx.AsyncClient(transport=transport) as client:
        await client.post(f"{mock_server.base_url}/chat/completions", json=BODY)
        assert pool.connection_count == 1
        await asyncio.sleep(0.1)
        await client.post(f"{other.base_url}/chat/completions", json=BODY)
        assert pool.connection_count == 1  # the expired one was closed at check-in
        await client.post(f"{mock_server.base_url}/chat/completions", json=BODY)
        a, b = mock_server.requests
        assert a.connection != b.connection


async def test_unsupported_scheme_and_closed_pool_raise() -> None:
    transport, _ = pooled_transport()
    async with httpx.AsyncClient(transport=transport) as client:
        with pytest.raises(httpx.UnsupportedProtocol):
            await client.get("ftp://127.0.0.1/x")
    with pytest.raises(RuntimeError, match="has been closed"):
        await transport.handle_async_request(httpx.Request("GET", "http://127.0.0.1:1/"))


async def test_failed_connect_is_not_pooled() -> None:
    transport, pool = pooled_transport()
    async with httpx.AsyncClient(transport=transport) as client:
        with pytest.raises(httpx.ConnectError):
            await client.get("http://127.0.0.1:1/")
    assert pool.connection_count == 0
