"""The capture endpoint's own HTTP/1.1 server, spoken to on raw sockets: request framings
(chunked, ``Expect: 100-continue``, pipelined, HTTP/1.0), malformed requests, ``HEAD``,
and a program that hangs up mid-call."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from benchmax.capture import CaptureEndpoint, CaptureSession
from benchmax.envs import StaticBearerAuth
from benchmax.testing import MockModelServer, echo

CALL = json.dumps({"model": "policy", "messages": [{"role": "user", "content": "hello"}]}).encode()


@pytest.fixture
async def token_mock() -> AsyncIterator[MockModelServer]:
    async with MockModelServer(echo, tokens=True) as server:
        yield server


@pytest.fixture
async def endpoint() -> AsyncIterator[CaptureEndpoint]:
    async with CaptureEndpoint() as started:
        yield started


def open_session(endpoint: CaptureEndpoint, upstream: MockModelServer) -> CaptureSession:
    return endpoint.open_session(
        rollout_id="r1",
        model="policy",
        upstream_url=upstream.base_url,
        upstream_auth=StaticBearerAuth("sk-upstream"),
    )


async def connect(
    endpoint: CaptureEndpoint,
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", int(endpoint.origin.rsplit(":", 1)[1]))


async def read_answer(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 60)
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    body = await asyncio.wait_for(reader.readexactly(length), 60) if length else b""
    return int(lines[0].split()[1]), headers, body


def head_of(session: CaptureSession, extra: str = "", version: str = "1.1") -> bytes:
    return (
        f"POST /rollouts/r1/v1/chat/completions HTTP/{version}\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {session.api_key}\r\nContent-Type: application/json\r\n"
        f"{extra}\r\n"
    ).encode()


async def test_chunked_request_body(endpoint: CaptureEndpoint, token_mock: MockModelServer) -> None:
    session = open_session(endpoint, token_mock)
    reader, writer = await connect(endpoint)
    first, second = CALL[:10], CALL[10:]
    writer.write(head_of(session, "Transfer-Encoding: chunked\r\n"))
    writer.write(b"%x;ext=1\r\n%s\r\n" % (len(first), first))
    await writer.drain()
    writer.write(b"%x\r\n%s\r\n0\r\nX-Trailer: 1\r\n\r\n" % (len(second), second))
    status, _, body = await read_answer(reader)
    writer.close()
    assert status == 200, body
    assert json.loads(body)["choices"][0]["message"]["content"] == "hello"
    assert len(session.calls) == 1


async def test_expect_100_continue_then_the_answer(
    endpoint: CaptureEndpoint, token_mock: MockModelServer
) -> None:
    session = open_session(endpoint, token_mock)
    reader, writer = await connect(endpoint)
    writer.write(head_of(session, f"Expect: 100-continue\r\nContent-Length: {len(CALL)}\r\n"))
    await writer.drain()
    interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 60)
    assert interim.startswith(b"HTTP/1.1 100 ")
    writer.write(CALL)
    status, _, _ = await read_answer(reader)
    writer.close()
    assert status == 200 and len(session.calls) == 1


async def test_pipelined_requests_are_answered_in_order(
    endpoint: CaptureEndpoint, token_mock: MockModelServer
) -> None:
    session = open_session(endpoint, token_mock)
    reader, writer = await connect(endpoint)
    second = CALL.replace(b"hello", b"again")
    writer.write(
        head_of(session, f"Content-Length: {len(CALL)}\r\n")
        + CALL
        + head_of(session, f"Content-Length: {len(second)}\r\n")
        + second
    )
    answers = [await read_answer(reader), await read_answer(reader)]
    writer.close()
    contents = [json.loads(body)["choices"][0]["message"]["content"] for _, _, body in answers]
    assert contents == ["hello", "again"]


async def test_http_10_is_answered_and_closed(
    endpoint: CaptureEndpoint, token_mock: MockModelServer
) -> None:
    session = open_session(endpoint, token_mock)
    reader, writer = await connect(endpoint)
    writer.write(head_of(session, f"Content-Length: {len(CALL)}\r\n", version="1.0") + CALL)
    status, headers, _ = await read_answer(reader)
    assert status == 200 and headers["connection"] == "close"
    assert await asyncio.wait_for(reader.read(), 60) == b""  # closed after the answer
    writer.close()


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"GARBAGE\r\n\r\n", 400),
        (b"POST /v1/chat/completions HTTP/1.1\r\nno colon here\r\n\r\n", 400),
        (b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: x\r\n\r\n", 400),
        (b"POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
        (b"GET / HTTP/1.1\r\nX-Long: " + b"a" * 70_000, 431),
    ],
    ids=["request_line", "header_line", "length", "chunk_size", "head_too_long"],
)
async def test_malformed_request_is_refused_and_closed(
    endpoint: CaptureEndpoint, raw: bytes, status: int
) -> None:
    reader, writer = await connect(endpoint)
    writer.write(raw)
    answered, _, body = await read_answer(reader)
    assert answered == status and json.loads(body)["error"]["code"] == "bad_request"
    assert await asyncio.wait_for(reader.read(), 60) == b""
    writer.close()


async def test_chunked_body_over_the_limit_is_413(
    endpoint: CaptureEndpoint, token_mock: MockModelServer
) -> None:
    session = open_session(endpoint, token_mock)
    reader, writer = await connect(endpoint)
    writer.write(head_of(session, "Transfer-Encoding: chunked\r\n") + b"8000000\r\n{")
    status, _, body = await read_answer(reader)
    writer.close()
    assert status == 413 and json.loads(body)["error"]["code"] == "request_too_large"
    assert session.calls == ()


async def test_head_gets_headers_only(
    endpoint: CaptureEndpoint, token_mock: MockModelServer
) -> None:
    session = open_session(endpoint, token_mock)
    reader, writer = await connect(endpoint)
    writer.write(
        f"HEAD /v1/models HTTP/1.1\r\nAuthorization: Bearer {session.api_key}\r\n\r\n".encode()
        + f"GET /v1/models HTTP/1.1\r\nAuthorization: Bearer {session.api_key}\r\n\r\n".encode()
    )
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 60)
    assert head.startswith(b"HTTP/1.1 200 ") and b"Content-Length: " in head
    status, _, body = await read_answer(reader)  # the next answer starts right after the head
    writer.close()
    assert status == 200 and json.loads(body)["data"][0]["id"] == "policy"


async def test_program_that_hangs_up_mid_call_still_has_its_call_recorded(
    endpoint: CaptureEndpoint,
) -> None:
    release = asyncio.Event()

    async def slow(messages: list[dict[str, object]]) -> str:
        await release.wait()
        return "late"

    async with MockModelServer(slow, tokens=True) as upstream:
        session = open_session(endpoint, upstream)
        _reader, writer = await connect(endpoint)
        writer.write(head_of(session, f"Content-Length: {len(CALL)}\r\n") + CALL)
        await writer.drain()
        while not upstream.requests:
            await asyncio.sleep(0.01)
        writer.close()
        release.set()
        for _ in range(6000):
            if session.calls:
                break
            await asyncio.sleep(0.01)
    assert len(session.calls) == 1 and session.failure is None
