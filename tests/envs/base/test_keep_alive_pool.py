"""benchmax.envs._http_connections.KeepAlivePool: reuse, no cap, expiry, closing."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from tests.envs.base.support import HoldUntilAll

from benchmax.envs import _http_connections
from benchmax.envs._http_connections import KeepAlivePool, install_keep_alive_pool
from benchmax.testing import Fault, MockModelServer

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
    mock_server.policy = HoldUntilAll(50, release=True)
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


async def test_a_connection_closed_after_checkout_is_replaced_before_writing(
    mock_server: MockModelServer,
) -> None:
    # The race the checkout check cannot see: the server closes the idle connection
    # after it was taken from the pool. Nothing has been written yet, so the request
    # goes out once on a new connection.
    transport, pool = pooled_transport()
    events: list[str] = []

    async def close_server_side_once(event: str, info: dict[str, Any]) -> None:
        events.append(event)
        if event == "http11.send_request_headers.started" and len(events) == 1:
            assert await mock_server.close_idle_connections() == 1
            await asyncio.sleep(0.05)  # let the close reach this side

    url = f"{mock_server.base_url}/chat/completions"
    async with httpx.AsyncClient(transport=transport) as client:
        await client.post(url, json=BODY)
        response = await client.post(url, json=BODY, extensions={"trace": close_server_side_once})
        assert response.status_code == 200
        assert pool.connection_count == 1
    warm, sent = mock_server.requests  # the closed connection never carried the request
    assert warm.connection != sent.connection
    assert events.count("http11.send_request_headers.started") == 2


async def test_the_replacement_connection_is_never_resent(mock_server: MockModelServer) -> None:
    transport, pool = pooled_transport()

    async def close_server_side_every_time(event: str, info: dict[str, Any]) -> None:
        if event == "http11.send_request_headers.started":
            await mock_server.close_idle_connections()
            await asyncio.sleep(0.05)

    url = f"{mock_server.base_url}/chat/completions"
    async with httpx.AsyncClient(transport=transport) as client:
        await client.post(url, json=BODY)
        with pytest.raises(httpx.TransportError):
            await client.post(url, json=BODY, extensions={"trace": close_server_side_every_time})
        assert pool.connection_count == 0
    assert len(mock_server.requests) == 1


@pytest.mark.parametrize("reused", [False, True])
async def test_a_dropped_request_is_not_resent(mock_server: MockModelServer, reused: bool) -> None:
    transport, pool = pooled_transport()
    url = f"{mock_server.base_url}/chat/completions"
    async with httpx.AsyncClient(transport=transport) as client:
        if reused:
            await client.post(url, json=BODY)
        mock_server.inject(Fault.drop())
        with pytest.raises(httpx.TransportError):
            await client.post(url, json=BODY)
        assert pool.connection_count == 0 and pool.idle_count == 0
    assert len(mock_server.requests) == 1 + reused
    assert len({r.connection for r in mock_server.requests}) == 1


async def test_connection_close_responses_are_never_pooled(make_mock_server: Any) -> None:
    server = await make_mock_server(keep_alive=False)
    transport, pool = pooled_transport()
    async with httpx.AsyncClient(transport=transport) as client:
        for _ in range(3):
            response = await client.post(f"{server.base_url}/chat/completions", json=BODY)
            assert response.status_code == 200
            assert pool.connection_count == 0 and pool.idle_count == 0
    assert len({r.connection for r in server.requests}) == 3


async def test_requests_cancelled_while_waiting_leave_no_connection(
    mock_server: MockModelServer,
) -> None:
    hold = mock_server.policy = HoldUntilAll(10, release=False)
    transport, pool = pooled_transport()
    url = f"{mock_server.base_url}/chat/completions"
    async with httpx.AsyncClient(transport=transport) as client:
        await client.get(f"{mock_server.base_url}/models")  # one idle connection to reuse
        tasks = [asyncio.create_task(client.post(url, json=BODY)) for _ in range(10)]
        await asyncio.wait_for(hold.all_arrived.wait(), 10)
        assert pool.connection_count == 10
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert pool.connection_count == 0 and pool.idle_count == 0
        mock_server.policy = lambda body: "after"
        assert (await client.post(url, json=BODY)).status_code == 200
        assert pool.connection_count == 1 and pool.idle_count == 1


async def test_a_request_cancelled_mid_body_is_not_pooled() -> None:
    body_started = asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
        await writer.drain()
        body_started.set()
        await reader.read()  # until the client closes the connection
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    transport, pool = pooled_transport()
    async with server, httpx.AsyncClient(transport=transport) as client:
        task = asyncio.create_task(client.get(f"http://127.0.0.1:{port}/"))
        await asyncio.wait_for(body_started.wait(), 5)
        await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert pool.connection_count == 0 and pool.idle_count == 0
