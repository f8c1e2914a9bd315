"""The per-loop connection pool under BaseEnv and the Judge (benchmax._modelhttp.connections)."""

from __future__ import annotations

import asyncio
import gc
import socket
import sys
import threading
import time
import warnings
from typing import Any

import aiohttp
import pytest
from tests.envs.base.support import (
    AnswerEnv,
    HoldUntilAll,
    ToolEnv,
    make_request,
    make_request_for_url,
    open_sockets,
    tool_reply,
)

from benchmax._modelhttp import connections, keepalive
from benchmax._modelhttp.connections import PoolLease, sdk_http_client
from benchmax.testing import Fault, MockModelServer, echo, scripted


def shared_pool() -> Any:
    return connections._REGISTRY[asyncio.get_running_loop()]


async def test_envs_and_judge_clients_share_one_pool_per_loop(
    mock_server: MockModelServer,
) -> None:
    envs = [AnswerEnv(), AnswerEnv()]
    for i, env in enumerate(envs):
        await env.run_rollout(make_request(mock_server, f"rollout-{i}"))
    pool = shared_pool()
    a, b = mock_server.requests
    assert a.connection == b.connection  # the keep-alive connection was reused
    first, second = sdk_http_client(), sdk_http_client()
    assert first is not second
    for client in (first, second):
        response = await client.get(f"{mock_server.base_url}/models")
        assert response.status_code == 200
        await client.aclose()
    assert shared_pool() is pool and not pool.closed
    for env in envs:
        await env.aclose()
    assert pool.closed
    assert asyncio.get_running_loop() not in connections._REGISTRY


async def test_closing_an_sdk_client_never_closes_the_pool(mock_server: MockModelServer) -> None:
    async with sdk_http_client() as client:
        pool = shared_pool()
        await client.get(f"{mock_server.base_url}/models")
    assert not pool.closed and pool.users == 0
    with pytest.raises(RuntimeError, match="has been closed"):
        await client.get(f"{mock_server.base_url}/models")


def test_a_new_event_loop_gets_a_fresh_pool() -> None:
    env = AnswerEnv()
    seen: list[Any] = []

    async def one_run() -> str:
        async with MockModelServer(echo) as server:
            rollout = await env.run_rollout(make_request(server))
            seen.append(shared_pool())
        return rollout.termination_reason

    assert asyncio.run(one_run()) == "finished"
    assert asyncio.run(one_run()) == "finished"
    first, second = seen
    assert first is not second
    assert first.closed and second.closed  # closed at loop shutdown
    assert not connections._REGISTRY


def test_threads_with_their_own_loops_get_their_own_pools() -> None:
    seen: dict[str, Any] = {}
    barrier = threading.Barrier(2)

    def worker(name: str) -> None:
        async def run() -> None:
            seen[name] = connections.loop_pool()
            await asyncio.to_thread(barrier.wait, 60)

        asyncio.run(run())

    threads = [threading.Thread(target=worker, args=(n,)) for n in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
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
        return shared_pool()  # it still holds the (now server-closed) connection

    stale = loop.run_until_complete(use_pool())
    loop.close()  # no shutdown_asyncgens: the pool is never closed by the loop
    assert not stale.closed

    async def next_use() -> str:
        async with MockModelServer(echo) as server:
            return (await env.run_rollout(make_request(server))).termination_reason

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # even as errors, warnings of the drop stay unraisable
        assert asyncio.run(next_use()) == "finished"
        assert loop not in connections._REGISTRY
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


async def test_lease_keeps_pool_until_last_holder_and_open_calls_finish(
    mock_server: MockModelServer,
) -> None:
    first, second = PoolLease(), PoolLease()
    pool = first.hold()
    assert second.hold() is pool and pool.holders == 2
    client = sdk_http_client()
    await first.aclose()
    assert not pool.closed
    await second.aclose()
    assert not pool.closed and pool.release_pending  # a client over it is still open
    await client.get(f"{mock_server.base_url}/models")
    await client.aclose()
    assert pool.closed
    assert asyncio.get_running_loop() not in connections._REGISTRY
    assert connections.loop_pool() is not pool
    await first.aclose()  # releasing again is harmless


def test_a_lease_pickles_as_a_fresh_one() -> None:
    import pickle

    lease = pickle.loads(pickle.dumps(PoolLease()))
    assert isinstance(lease, PoolLease)


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
    pool = shared_pool()
    await env.aclose()
    assert pool.closed
    rollout = await env.run_rollout(make_request(mock_server, "after-aclose"))
    assert rollout.termination_reason == "finished"
    assert shared_pool() is not pool
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


async def test_every_rollout_in_flight_gets_a_connection_then_they_are_reused(
    mock_server: MockModelServer,
) -> None:
    count = 150  # above aiohttp's default cap of 100 connections
    mock_server.policy = HoldUntilAll(count, release=True)
    env = AnswerEnv()
    env.reward_keys = ("correct",)
    first = await asyncio.wait_for(
        env.run_group([make_request(mock_server, f"a{k}") for k in range(count)]), 120
    )
    assert {o.termination_reason for o in first.values()} == {"finished"}
    mock_server.policy = echo
    await env.run_group([make_request(mock_server, f"b{k}") for k in range(count)])
    batches = [
        {r.connection for r in mock_server.requests if r.session.startswith(tag)} for tag in "ab"
    ]
    assert len(batches[0]) == count
    assert batches[1] <= batches[0]  # the second batch rode the kept-alive connections
    await env.aclose()


async def test_connection_close_responses_are_never_reused(make_mock_server: Any) -> None:
    server = await make_mock_server(keep_alive=False)
    env = AnswerEnv()
    for k in range(3):
        rollout = await env.run_rollout(make_request(server, f"r{k}"))
        assert rollout.termination_reason == "finished"
    assert len({r.connection for r in server.requests}) == 3
    await env.aclose()


async def test_rollouts_cancelled_while_waiting_leave_no_connection(
    mock_server: MockModelServer,
) -> None:
    env = AnswerEnv()
    await env.run_rollout(make_request(mock_server, "warm"))  # one idle connection to reuse
    baseline = open_sockets()
    hold = mock_server.policy = HoldUntilAll(10, release=False)
    tasks = [
        asyncio.create_task(env.run_rollout(make_request(mock_server, f"held-{k}")))
        for k in range(10)
    ]
    await asyncio.wait_for(hold.all_arrived.wait(), 60)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    # Every client end is closed: what remains are the server's ends of the 10 held
    # requests (it still holds them), one of which arrived on the kept-alive connection.
    expected = baseline - 1 + 9
    for _ in range(3000):  # the closes land within a minute, however busy the machine
        if open_sockets() == expected:
            break
        await asyncio.sleep(0.02)
    assert open_sockets() == expected
    mock_server.policy = echo
    rollout = await env.run_rollout(make_request(mock_server, "after"))
    assert rollout.termination_reason == "finished"
    await env.aclose()


async def test_a_connection_closed_after_checkout_is_replaced_before_writing(
    mock_server: MockModelServer,
) -> None:
    # The race aiohttp's own check cannot see: the server closes the idle connection
    # after it was taken from the pool (here: while a trace hook runs). Nothing has
    # been written yet, so the request goes out once on a new connection.
    reused: list[str] = []

    async def close_server_side_once(*args: Any) -> None:
        reused.append("reuse")
        if len(reused) == 1:
            assert await mock_server.close_idle_connections() == 1
            time.sleep(0.05)  # the close reaches this socket, but not yet the event loop

    trace = aiohttp.TraceConfig()
    trace.on_connection_reuseconn.append(close_server_side_once)
    connector = connections._FreshConnector(limit=0)
    url = f"{mock_server.base_url}/chat/completions"
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    async with aiohttp.ClientSession(connector=connector, trace_configs=[trace]) as session:
        for _ in range(2):
            async with session.post(url, json=body) as response:
                assert response.status == 200
                await response.read()
    warm, sent = mock_server.requests  # the closed connection never carried the request
    assert warm.connection != sent.connection
    assert reused == ["reuse"]


async def test_readability_check_sees_a_close_the_loop_has_not_seen() -> None:
    accepted: list[socket.socket] = []
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_connection(asyncio.Protocol, "127.0.0.1", port)
    try:
        peer, _ = listener.accept()
        accepted.append(peer)
        assert not keepalive.closed_by_peer(transport)  # open and idle
        peer.close()
        time.sleep(0.05)  # no await: the event loop has not read the EOF
        assert not transport.is_closing()
        assert keepalive.closed_by_peer(transport)
    finally:
        transport.close()
        listener.close()
    assert keepalive.closed_by_peer(transport)  # closing counts as closed
