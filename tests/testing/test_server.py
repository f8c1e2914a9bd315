"""HTTP mechanics and lifecycle of MockModelServer, through real sockets."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Awaitable, Callable

import httpx
import pytest

from benchmax.testing import MockModelServer, echo, session_of_path

RawHttp = Callable[[int, bytes], Awaitable[bytes]]
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}


# -- addresses and sessions ---------------------------------------------------------------------


async def test_base_url_is_loopback_v1_on_an_ephemeral_port(mock_server: MockModelServer) -> None:
    assert mock_server.base_url == f"http://127.0.0.1:{mock_server.port}/v1"
    assert mock_server.port > 0
    assert mock_server.session_url("r-1") == f"http://127.0.0.1:{mock_server.port}/sessions/r-1/v1"
    assert mock_server.session_url("") == mock_server.base_url


def test_session_url_keeps_the_rollout_id_template(mock_server: MockModelServer) -> None:
    origin = mock_server.origin
    assert mock_server.session_url("{rollout_id}") == f"{origin}/sessions/{{rollout_id}}/v1"
    assert mock_server.session_url("a b/{rollout_id}{rollout_id}") == (
        f"{origin}/sessions/a%20b%2F{{rollout_id}}{{rollout_id}}/v1"
    )
    assert mock_server.session_url("{other}") == f"{origin}/sessions/%7Bother%7D/v1"


async def test_unstarted_server_has_no_url() -> None:
    server = MockModelServer()
    with pytest.raises(RuntimeError, match="not started"):
        _ = server.base_url
    assert not server.started


@pytest.mark.parametrize("port", [-1, 65536, True, "80"])
def test_invalid_port_is_rejected(port: object) -> None:
    with pytest.raises(ValueError, match="port"):
        MockModelServer(port=port)  # type: ignore[arg-type]


def test_non_callable_policy_is_rejected() -> None:
    with pytest.raises(TypeError, match="callable"):
        MockModelServer("echo")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "name", ["r1", "rollout.7_a-b", "with space", "a/b", "ünï", "100%", "sessions/x/v1"]
)
async def test_session_url_round_trips_to_recorded_session(
    mock_server: MockModelServer, name: str
) -> None:
    async with httpx.AsyncClient(verify=False) as client:
        response = await client.post(f"{mock_server.session_url(name)}/chat/completions", json=CHAT)
    assert response.status_code == 200
    assert [r.session for r in mock_server.requests] == [name]
    assert mock_server.requests_for(name) == mock_server.requests
    assert mock_server.requests_for("") == []


@pytest.mark.parametrize(
    ("path", "session"),
    [
        ("/v1/chat/completions", ""),
        ("/chat/completions", ""),
        ("/sessions/abc/v1/chat/completions", "abc"),
        ("/sessions/abc/chat/completions", "abc"),
        ("/team/x/v1/chat/completions", "team/x"),
        ("/sessions/a%2Fb/v1/models", "a/b"),
        ("/v1/embeddings", ""),
    ],
)
def test_session_of_path(path: str, session: str) -> None:
    assert session_of_path(path) == session


async def test_any_path_ending_in_chat_completions_is_served(mock_server: MockModelServer) -> None:
    async with httpx.AsyncClient(verify=False) as client:
        response = await client.post(
            f"{mock_server.origin}/custom/prefix/chat/completions", json=CHAT
        )
    assert response.json()["choices"][0]["message"]["content"] == "hello"
    assert mock_server.requests[0].session == "custom/prefix"


# -- response shape -----------------------------------------------------------------------------


async def test_chat_completion_has_the_openai_shape(mock_server: MockModelServer) -> None:
    async with httpx.AsyncClient(verify=False) as client:
        response = await client.post(f"{mock_server.base_url}/chat/completions", json=CHAT)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    data = response.json()
    assert data["object"] == "chat.completion"
    assert data["id"].startswith("chatcmpl-")
    assert isinstance(data["created"], int)
    assert data["model"] == "m"
    assert data["choices"] == [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "hello"},
            "logprobs": None,
            "finish_reason": "stop",
        }
    ]
    usage = data["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["prompt_tokens"] > 0


async def test_models_endpoint_lists_a_model(mock_server: MockModelServer) -> None:
    async with httpx.AsyncClient(verify=False) as client:
        response = await client.get(f"{mock_server.base_url}/models")
    assert response.status_code == 200
    assert response.json()["data"][0]["id"] == "mock-model"
    assert response.json()["object"] == "list"


async def test_unknown_path_is_404_with_openai_error(mock_server: MockModelServer) -> None:
    async with httpx.AsyncClient(verify=False) as client:
        response = await client.post(f"{mock_server.base_url}/embeddings", json={})
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "unknown_url"


async def test_get_on_chat_completions_is_405(mock_server: MockModelServer) -> None:
    async with httpx.AsyncClient(verify=False) as client:
        response = await client.get(f"{mock_server.base_url}/chat/completions")
    assert response.status_code == 405
    assert "POST" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    "content", [b"not json", b"[1, 2]", b'{"model": "m"}', b'{"messages": "x"}', b""]
)
async def test_invalid_request_body_is_400(mock_server: MockModelServer, content: bytes) -> None:
    async with httpx.AsyncClient(verify=False) as client:
        response = await client.post(f"{mock_server.base_url}/chat/completions", content=content)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert "messages" in error["message"]
    assert len(mock_server.requests) == 1


async def test_missing_model_is_answered_with_the_default_model(
    mock_server: MockModelServer,
) -> None:
    async with httpx.AsyncClient(verify=False) as client:
        response = await client.post(
            f"{mock_server.base_url}/chat/completions", json={"messages": []}
        )
    assert response.json()["model"] == "mock-model"
    assert response.json()["choices"][0]["message"]["content"] == ""


# -- HTTP/1.1 mechanics ---------------------------------------------------------------------------


async def test_keep_alive_reuses_one_connection(mock_server: MockModelServer) -> None:
    async with httpx.AsyncClient(verify=False) as client:
        for _ in range(5):
            response = await client.post(f"{mock_server.base_url}/chat/completions", json=CHAT)
            assert response.status_code == 200
            assert "connection" not in response.headers
    assert {r.connection for r in mock_server.requests} == {1}


async def test_connection_close_is_honored(mock_server: MockModelServer) -> None:
    async with httpx.AsyncClient(verify=False) as client:
        for _ in range(3):
            response = await client.post(
                f"{mock_server.base_url}/chat/completions",
                json=CHAT,
                headers={"Connection": "close"},
            )
            assert response.headers["connection"] == "close"
    assert [r.connection for r in mock_server.requests] == [1, 2, 3]


def _raw_chat(*, version: bytes = b"1.1", headers: bytes = b"Host: x\r\n") -> bytes:
    """A raw ``POST /v1/chat/completions`` carrying ``CHAT``."""
    body = json.dumps(CHAT).encode()
    head = b"POST /v1/chat/completions HTTP/" + version + b"\r\n" + headers
    return head + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body


async def test_raw_connection_close_ends_the_connection(
    mock_server: MockModelServer, raw_http: RawHttp
) -> None:
    request = _raw_chat(
        headers=b"Host: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
    )
    # read() returns only once the server closes the socket.
    data = await raw_http(mock_server.port, request)
    assert data.startswith(b"HTTP/1.1 200 ")
    assert json.loads(data.partition(b"\r\n\r\n")[2])["choices"][0]["message"]["content"] == "hello"


async def test_http_1_0_request_is_answered_and_closed(
    mock_server: MockModelServer, raw_http: RawHttp
) -> None:
    data = await raw_http(mock_server.port, _raw_chat(version=b"1.0", headers=b""))
    assert data.startswith(b"HTTP/1.1 200 ")


async def test_pipelined_requests_on_one_connection(
    mock_server: MockModelServer, raw_http: RawHttp
) -> None:
    one = _raw_chat()
    last = _raw_chat(headers=b"Host: x\r\nConnection: close\r\n")
    data = await raw_http(mock_server.port, one + one + last)
    assert data.count(b"HTTP/1.1 200 ") == 3
    assert {r.connection for r in mock_server.requests} == {1}


async def test_chunked_request_body(mock_server: MockModelServer) -> None:
    payload = json.dumps(CHAT).encode()

    async def chunks():
        for start in range(0, len(payload), 7):
            yield payload[start : start + 7]

    async with httpx.AsyncClient(verify=False) as client:
        response = await client.post(f"{mock_server.base_url}/chat/completions", content=chunks())
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == "hello"
    recorded = mock_server.requests[0]
    assert recorded.headers["transfer-encoding"] == "chunked"
    assert recorded.body == CHAT


async def test_expect_100_continue(mock_server: MockModelServer) -> None:
    body = json.dumps(CHAT).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", mock_server.port)
    try:
        writer.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
            b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n"
        )
        interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 60)
        assert interim.startswith(b"HTTP/1.1 100 ")
        writer.write(body)
        rest = await asyncio.wait_for(reader.read(), 60)
        assert rest.startswith(b"HTTP/1.1 200 ")
    finally:
        writer.close()
        await writer.wait_closed()


async def test_100_concurrent_requests_are_in_flight_together(
    mock_server: MockModelServer,
) -> None:
    arrived = 0
    everyone_here = asyncio.Event()

    async def barrier(body: dict) -> str:
        nonlocal arrived
        arrived += 1
        if arrived == 100:
            everyone_here.set()
        await asyncio.wait_for(everyone_here.wait(), 60)
        return echo(body)

    mock_server.policy = barrier
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    async with httpx.AsyncClient(limits=limits, verify=False) as client:
        responses = await asyncio.gather(
            *(
                client.post(
                    f"{mock_server.session_url(f's{i}')}/chat/completions",
                    json={"messages": [{"role": "user", "content": str(i)}]},
                )
                for i in range(100)
            )
        )
    contents = [r.json()["choices"][0]["message"]["content"] for r in responses]
    assert contents == [str(i) for i in range(100)]
    assert len({r.connection for r in mock_server.requests}) == 100


# -- lifecycle ------------------------------------------------------------------------------------


async def test_stop_closes_every_connection_and_leaves_no_fds_or_tasks(
    assert_released: Callable[[], None],
) -> None:
    server = MockModelServer(echo)
    await server.start()
    url = f"{server.base_url}/chat/completions"
    # Idle keep-alive connections plus one request held by a slow policy.
    started = asyncio.Event()

    async def slow(body: dict) -> str:
        started.set()
        await asyncio.sleep(30)
        return "late"

    client = httpx.AsyncClient(verify=False)
    for _ in range(3):
        assert (await client.post(url, json=CHAT)).status_code == 200
    server.policy = slow
    pending = asyncio.create_task(client.post(url, json=CHAT))
    await asyncio.wait_for(started.wait(), 60)
    assert not pending.done()

    await asyncio.wait_for(server.stop(), 60)
    with pytest.raises(httpx.RemoteProtocolError):
        await pending
    await client.aclose()
    await asyncio.sleep(0)
    assert_released()
    assert not server.started
    await server.stop()  # idempotent


async def test_stopped_server_refuses_connections() -> None:
    async with MockModelServer() as server:
        port = server.port
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


async def test_start_twice_is_an_error(mock_server: MockModelServer) -> None:
    with pytest.raises(RuntimeError, match="already started"):
        await mock_server.start()


async def test_binds_loopback_only_by_default(mock_server: MockModelServer) -> None:
    sockets = mock_server._server.sockets  # type: ignore[union-attr]
    assert [s.getsockname()[0] for s in sockets] == ["127.0.0.1"]


async def test_serve_forever_stops_when_cancelled() -> None:
    server = MockModelServer()
    task = asyncio.create_task(server.serve_forever())
    while not server.started:
        await asyncio.sleep(0.01)
    async with httpx.AsyncClient(verify=False) as client:
        response = await client.post(f"{server.base_url}/chat/completions", json=CHAT)
        assert response.status_code == 200
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not server.started


async def test_restart_after_stop_serves_again() -> None:
    server = MockModelServer()
    for _ in range(2):
        async with server:
            async with httpx.AsyncClient(verify=False) as client:
                response = await client.post(f"{server.base_url}/chat/completions", json=CHAT)
            assert response.status_code == 200
    assert len(server.requests) == 2


async def test_record_false_keeps_no_requests(make_mock_server) -> None:
    server = await make_mock_server(echo, record=False)
    async with httpx.AsyncClient(verify=False) as client:
        await client.post(f"{server.base_url}/chat/completions", json=CHAT)
    assert server.requests == []


async def test_large_bodies_with_connection_close_arrive_whole(
    mock_server: MockModelServer, http_client: httpx.AsyncClient
) -> None:
    big = "x" * 3_000_000
    response = await http_client.post(
        f"{mock_server.base_url}/chat/completions",
        json={"messages": [{"role": "user", "content": big}]},
        headers={"Connection": "close"},
    )
    assert response.headers["connection"] == "close"
    assert response.json()["choices"][0]["message"]["content"] == big


async def test_keep_alive_false_closes_after_every_response(make_mock_server) -> None:
    server = await make_mock_server(echo, keep_alive=False)
    async with httpx.AsyncClient(verify=False) as client:
        for _ in range(3):
            response = await client.post(f"{server.base_url}/chat/completions", json=CHAT)
            assert response.headers["connection"] == "close"
            assert response.json()["choices"][0]["message"]["content"] == "hello"
    assert [r.connection for r in server.requests] == [1, 2, 3]


async def test_close_idle_connections(
    mock_server: MockModelServer, http_client: httpx.AsyncClient
) -> None:
    url = f"{mock_server.base_url}/chat/completions"
    assert (await http_client.post(url, json=CHAT)).status_code == 200
    assert await mock_server.close_idle_connections() == 1
    assert await mock_server.close_idle_connections() == 0
    assert (await http_client.post(url, json=CHAT)).status_code == 200
    assert [r.connection for r in mock_server.requests] == [1, 2]


async def test_close_idle_connections_spares_busy_ones(mock_server: MockModelServer) -> None:
    release = asyncio.Event()

    async def held(body: dict) -> str:
        await release.wait()
        return "held"

    mock_server.policy = held
    async with httpx.AsyncClient(verify=False) as client:
        pending = asyncio.create_task(
            client.post(f"{mock_server.base_url}/chat/completions", json=CHAT)
        )
        while not mock_server.requests:
            await asyncio.sleep(0.01)
        assert await mock_server.close_idle_connections() == 0
        release.set()
        assert (await pending).json()["choices"][0]["message"]["content"] == "held"
