"""Malformed HTTP, oversized requests, idle connections and shutdown under load."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import httpx
import openai
import pytest

from benchmax.testing import MockModelServer, echo

RawHttp = Callable[[int, bytes], Awaitable[bytes]]
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}


def _status(data: bytes) -> int:
    return int(data.split(b" ", 2)[1])


@pytest.mark.parametrize(
    ("payload", "status"),
    [
        (b"NOT HTTP AT ALL\r\n\r\n", 400),
        (b"\x00\xff\xfe garbage \x01\r\n\r\n", 400),
        (b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: nope\r\n\r\n", 400),
        (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nbad header line\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
        (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
    ],
)
async def test_malformed_requests_get_an_error_and_close(
    mock_server: MockModelServer, payload: bytes, status: int, raw_http: RawHttp
) -> None:
    data = await raw_http(mock_server.port, payload)
    assert _status(data) == status
    assert b"connection: close" in data.lower()
    assert "error" in json.loads(data.partition(b"\r\n\r\n")[2])
    async with httpx.AsyncClient() as client:  # still serving
        response = await client.post(f"{mock_server.base_url}/chat/completions", json=CHAT)
    assert response.status_code == 200


async def test_error_message_never_echoes_header_bytes(
    mock_server: MockModelServer, raw_http: RawHttp
) -> None:
    secret = b"sk-leaky-secret"
    payload = b"POST /v1/chat/completions HTTP/1.1\r\nAuthorization Bearer " + secret + b"\r\n\r\n"
    data = await raw_http(mock_server.port, payload)
    assert _status(data) == 400
    assert secret not in data


async def test_huge_header_block_is_431(mock_server: MockModelServer, raw_http: RawHttp) -> None:
    payload = b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 200_000 + b"\r\n\r\n"
    data = await raw_http(mock_server.port, payload)
    assert _status(data) == 431


async def test_body_over_the_limit_is_413_even_through_the_sdk(make_mock_server) -> None:
    server = await make_mock_server(echo, max_body_size=10_000)
    big = {"model": "m", "messages": [{"role": "user", "content": "x" * 200_000}]}
    async with httpx.AsyncClient() as client:
        response = await client.post(f"{server.base_url}/chat/completions", json=big)
        assert response.status_code == 413
        assert response.json()["error"]["code"] == "request_too_large"
        assert response.headers["connection"] == "close"
        ok = await client.post(f"{server.base_url}/chat/completions", json=CHAT)
        assert ok.status_code == 200
    [refused, accepted] = server.requests
    assert (refused.body, refused.raw_body) == (None, b"")
    assert accepted.body == CHAT
    sdk = openai.AsyncOpenAI(
        api_key="k", base_url=server.base_url, max_retries=0, http_client=httpx.AsyncClient()
    )
    try:
        with pytest.raises(openai.APIStatusError) as caught:
            await sdk.chat.completions.create(model="m", messages=big["messages"])
    finally:
        await sdk.close()
    assert caught.value.status_code == 413


async def test_declared_oversized_body_is_refused_before_it_is_sent(
    mock_server: MockModelServer, raw_http: RawHttp
) -> None:
    payload = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
        b"Content-Length: 1000000000\r\n\r\n"
    )
    data = await raw_http(mock_server.port, payload)  # no "100 Continue", no body sent
    assert data.startswith(b"HTTP/1.1 413 ")
    assert mock_server.requests[0].path == "/v1/chat/completions"


async def test_chunked_body_over_the_limit_is_413(make_mock_server) -> None:
    server = await make_mock_server(echo, max_body_size=1_000)

    async def chunks():
        for _ in range(50):
            yield b"x" * 100

    async with httpx.AsyncClient() as client:
        response = await client.post(f"{server.base_url}/chat/completions", content=chunks())
    assert response.status_code == 413


async def test_default_body_limit_allows_large_multimodal_requests(
    mock_server: MockModelServer,
) -> None:
    image = "data:image/png;base64," + "A" * 8_000_000
    content = [{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": image}}]
    async with httpx.AsyncClient() as client:
        response = await client.post(
            f"{mock_server.base_url}/chat/completions",
            json={"messages": [{"role": "user", "content": content}]},
        )
    assert response.json()["choices"][0]["message"]["content"] == "see"


@pytest.mark.parametrize("size", [0, -1, True, 1.5])
def test_max_body_size_is_validated(size: object) -> None:
    with pytest.raises(ValueError, match="max_body_size"):
        MockModelServer(max_body_size=size)  # type: ignore[arg-type]


async def test_deeply_nested_json_is_a_400_not_a_crash(mock_server: MockModelServer) -> None:
    async with httpx.AsyncClient() as client:
        response = await client.post(
            f"{mock_server.base_url}/chat/completions", content=b"[" * 200_000
        )
    assert response.status_code == 400


async def test_idle_and_half_sent_connections_do_not_delay_stop(
    assert_released: Callable[[], None],
) -> None:
    server = MockModelServer(echo)
    await server.start()
    streams = []
    for index in range(30):  # slowloris: nothing, a partial request line, partial headers
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(
            [b"", b"POST /v1/chat/comp", b"POST /v1/models HTTP/1.1\r\nHost: x\r\n"][index % 3]
        )
        await writer.drain()
        streams.append((reader, writer))
    await asyncio.sleep(0.05)
    loop = asyncio.get_running_loop()
    started = loop.time()
    await asyncio.wait_for(server.stop(), 60)
    # Stopping never waits out the 5 s it allows busy connections: half-sent requests are
    # not busy ones (a generous margin under that wait, for a busy machine).
    assert loop.time() - started < 4.5
    for reader, writer in streams:
        assert await asyncio.wait_for(reader.read(), 60) == b""
        writer.close()
        await writer.wait_closed()
    assert_released()


async def test_stop_with_many_busy_and_idle_connections_leaves_nothing_behind(
    assert_released: Callable[[], None],
) -> None:
    release = asyncio.Event()
    arrived = 0

    async def held(body: dict) -> str:
        nonlocal arrived
        arrived += 1
        await release.wait()
        return "late"

    server = MockModelServer(echo)
    await server.start()
    limits = httpx.Limits(max_connections=300, max_keepalive_connections=300)
    client = httpx.AsyncClient(limits=limits)
    url = f"{server.base_url}/chat/completions"
    await asyncio.gather(*(client.post(url, json=CHAT) for _ in range(50)))  # idle pool
    server.policy = held
    pending = [asyncio.create_task(client.post(url, json=CHAT)) for _ in range(80)]
    while arrived < 80:
        await asyncio.sleep(0.01)
    await asyncio.wait_for(server.stop(), 60)
    results = await asyncio.gather(*pending, return_exceptions=True)
    assert all(isinstance(result, httpx.TransportError) for result in results)
    await client.aclose()
    assert_released()


@pytest.mark.parametrize("method", ["HEAD", "OPTIONS", "DELETE", "PUT"])
async def test_other_methods_get_headers_or_errors_and_keep_the_connection(
    mock_server: MockModelServer, method: str
) -> None:
    async with httpx.AsyncClient() as client:
        for path in ("/v1/models", "/v1/chat/completions", "/elsewhere"):
            response = await client.request(method, f"{mock_server.origin}{path}")
            expected = {"/v1/models": 200 if method == "HEAD" else 404}.get(path)
            expected = expected or (405 if path.endswith("/completions") else 404)
            assert response.status_code == expected
            assert (response.content == b"") == (method == "HEAD")
            assert int(response.headers["content-length"]) > 0
        assert (await client.get(f"{mock_server.base_url}/models")).status_code == 200
    assert {r.connection for r in mock_server.requests} == {1}


def test_model_name_is_validated() -> None:
    with pytest.raises(ValueError, match="model"):
        MockModelServer(model="")
