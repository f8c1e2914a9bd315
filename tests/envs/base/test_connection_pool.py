"""The per-loop shared transport under BaseEnv (benchmax.envs._connection_pool)."""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
import warnings
from typing import Any

import httpx
import pytest
from tests.envs.base.support import (
    AnswerEnv,
    ToolEnv,
    make_request,
    make_request_for_url,
    open_sockets,
    tool_reply,
)

from benchmax.envs import _connection_pool
from benchmax.envs._connection_pool import PoolLease, pooled_http_client
from benchmax.testing import Fault, MockModelServer, echo, scripted


def shared_transport() -> Any:
    return _connection_pool._REGISTRY[asyncio.get_running_loop()].transport


async def test_clients_and_envs_share_one_transport_per_loop(
    mock_server: MockModelServer,
) -> None:
    first, second = pooled_http_client(), pooled_http_client()
    assert first is not second
    transport = shared_transport()
    for client in (first, second):
        response = await client.post(
            f"{mock_server.base_url}/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        )
        assert response.status_code == 200
        await client.aclose()
    assert shared_transport() is transport and not transport.closed
    a, b = mock_server.requests
    assert a.connection == b.connection  # the keep-alive connection was reused

    envs = [AnswerEnv(), AnswerEnv()]
    for i, env in enumerate(envs):
        await env.run_rollout(make_request(mock_server, f"rollout-{i}"))
    assert shared_transport() is transport
    assert {r.connection for r in mock_server.requests} == {a.connection}
    for env in envs:
        await env.aclose()
    assert transport.closed


async def test_closing_a_client_never_closes_the_shared_transport(
    mock_server: MockModelServer,
) -> None:
    async with pooled_http_client() as client:
        transport = shared_transport()
        await client.get(f"{mock_server.base_url}/models")
    assert not transport.closed
    with pytest.raises(RuntimeError, match="has been closed"):
        await client._transport.handle_async_request(  # type: ignore[attr-defined]
            httpx.Request("GET", f"{mock_server.base_url}/models")
        )


def test_a_new_event_loop_gets_a_fresh_transport() -> None:
    env = AnswerEnv()
    seen: list[Any] = []

    async def one_run() -> str:
        async with MockModelServer(echo) as server:
            rollout = await env.run_rollout(make_request(server))
            seen.append(shared_transport())
        return rollout.termination_reason

    assert asyncio.run(one_run()) == "finished"
    assert asyncio.run(one_run()) == "finished"
    first, second = seen
    assert first is not second
    assert first.closed and second.closed  # closed at loop shutdown
    assert not _connection_pool._REGISTRY


def test_threads_with_their_own_loops_get_their_own_transports() -> None:
    seen: dict[str, Any] = {}
    barrier = threading.Barrier(2)

    def worker(name: str) -> None:
        async def run() -> None:
            pooled_http_client()
            seen[name] = shared_transport()
            await asyncio.to_thread(barrier.wait, 5)

        asyncio.run(run())

    threads = [threading.Thread(target=worker, args=(n,)) for n in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert seen["a"] is not seen["b"]


def test_loop_closed_without_shutdown_is_dropped_without_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    unraisable: list[type[BaseException]] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda info: unraisable.append(info.exc_type))
    env = AnswerEnv()
    loop = asyncio.new_event_loop()

    async def use_pool() -> Any:
        async with MockModelServer(echo) as server:
            rollout = await env.run_rollout(make_request(server))
            assert rollout.termination_reason == "finished"
        return shared_transport()  # it still holds the (now server-closed) connection

    stale = loop.run_until_complete(use_pool())
    loop.close()  # no shutdown_asyncgens: the pool is never closed by the loop
    assert not stale.closed

    async def next_use() -> str:
        async with MockModelServer(echo) as server:
            return (await env.run_rollout(make_request(server))).termination_reason

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # even as errors, warnings of the drop stay unraisable
        assert asyncio.run(next_use()) == "finished"
        assert loop not in _connection_pool._REGISTRY
        del loop, stale
        gc.collect()
    assert set(unraisable) <= {ResourceWarning}


def test_aclose_and_loop_end_leave_no_socket_open() -> None:
    baseline = open_sockets()

    async def scenario() -> tuple[int, int]:
        in_loop = open_sockets()  # the loop's own self-pipe included
        async with MockModelServer(scripted([tool_reply(("multiply", {})), "42"])) as server:
            env = ToolEnv()
            env.tools = ()
            outcomes = await env.run_group([make_request(server, f"r{i}") for i in range(8)])
            assert {o.termination_reason for o in outcomes.values()} == {"finished"}
            assert open_sockets() > in_loop
            await env.aclose()
        return in_loop, open_sockets()

    in_loop, after_aclose = asyncio.run(scenario())
    assert after_aclose == in_loop
    assert open_sockets() == baseline


async def test_lease_keeps_pool_until_last_holder_and_open_clients_finish(
    mock_server: MockModelServer,
) -> None:
    first, second = PoolLease(), PoolLease()
    client, other = first.client(), second.client()
    transport = shared_transport()
    await first.aclose()
    assert not transport.closed
    await second.aclose()
    assert not transport.closed  # a client over it is still open
    await client.get(f"{mock_server.base_url}/models")
    await client.aclose()
    assert not transport.closed
    await other.aclose()
    assert transport.closed
    assert asyncio.get_running_loop() not in _connection_pool._REGISTRY
    pooled_http_client()
    assert shared_transport() is not transport


async def test_a_request_the_server_dropped_is_never_resent(mock_server: MockModelServer) -> None:
    # Dropped after the request arrived: resending would be a second model call.
    mock_server.inject(Fault.drop())
    env = AnswerEnv()
    rollout = await env.run_rollout(make_request(mock_server, "fresh"))
    assert rollout.termination_reason == "model_error"
    assert len(mock_server.requests) == 1  # on a new connection

    await env.run_rollout(make_request(mock_server, "warm"))  # leaves a kept-alive connection
    mock_server.inject(Fault.drop())
    rollout = await env.run_rollout(make_request(mock_server, "reused"))
    assert rollout.termination_reason == "model_error"
    (dropped,) = mock_server.requests_for("reused")
    assert dropped.connection == mock_server.requests_for("warm")[0].connection
    assert len(mock_server.requests) == 3
    await env.aclose()


async def test_idle_connections_closed_by_the_server_are_replaced(
    mock_server: MockModelServer,
) -> None:
    env = AnswerEnv()
    await env.run_rollout(make_request(mock_server, "a"))
    assert await mock_server.close_idle_connections() == 1
    rollout = await env.run_rollout(make_request(mock_server, "b"))
    assert rollout.termination_reason == "finished"
    await env.aclose()


async def test_environment_proxy_is_honored(
    monkeypatch: pytest.MonkeyPatch, make_mock_server: Any
) -> None:
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    target = await make_mock_server(scripted(["from target"]))
    proxy = await make_mock_server(scripted(["via proxy"]))

    def run_in_new_loop() -> str:
        async def run() -> str:
            rollout = await AnswerEnv().run_rollout(make_request(target))
            return rollout.messages[-1]["content"]

        return asyncio.run(run())

    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
    monkeypatch.delenv("http_proxy", raising=False)
    assert await asyncio.to_thread(run_in_new_loop) == "via proxy"
    (proxied,) = proxy.requests
    assert proxied.path == f"http://127.0.0.1:{target.port}/sessions/rollout-0/v1/chat/completions"
    assert target.requests == []

    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    assert await asyncio.to_thread(run_in_new_loop) == "from target"
    assert len(target.requests) == 1 and len(proxy.requests) == 1


async def test_concurrent_groups_share_the_pool_and_env_works_after_aclose(
    mock_server: MockModelServer,
) -> None:
    env = AnswerEnv()
    groups = [
        [make_request(mock_server, f"g{g}-r{r}", example_id=f"e{g}") for r in range(4)]
        for g in range(5)
    ]
    results = await asyncio.gather(*(env.run_group(group) for group in groups))
    assert all(o.termination_reason == "finished" for r in results for o in r.values())
    transport = shared_transport()
    await env.aclose()
    assert transport.closed
    rollout = await env.run_rollout(make_request(mock_server, "after-aclose"))
    assert rollout.termination_reason == "finished"
    assert shared_transport() is not transport
    await env.aclose()


async def test_https_proxy_from_the_environment_tunnels_requests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    request_lines: list[bytes] = []

    async def refuse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        request_lines.append(head.split(b"\r\n", 1)[0])
        writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    def reason_in_new_loop() -> str:
        async def run() -> str:
            request = make_request_for_url("https://127.0.0.1:9/v1")
            return (await AnswerEnv().run_rollout(request)).termination_reason

        return asyncio.run(run())

    proxy = await asyncio.start_server(refuse, "127.0.0.1", 0)
    async with proxy:
        port = proxy.sockets[0].getsockname()[1]
        monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{port}")
        monkeypatch.delenv("https_proxy", raising=False)
        assert await asyncio.to_thread(reason_in_new_loop) == "model_error"
        assert request_lines == [b"CONNECT 127.0.0.1:9 HTTP/1.1"]

        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        assert await asyncio.to_thread(reason_in_new_loop) == "model_error"  # direct: refused
        assert len(request_lines) == 1
