"""The plain keep-alive HTTP/1.1 client behind ``ChatSession(plain_http=True)`` (the capture
endpoint's upstream calls), against real local servers that frame, close and stall replies
the ways servers do."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from aiohttp import web

from benchmax._modelhttp import CallFailure, ChatSession, loop_pool
from benchmax.auth import ModelRequestContext, StaticBearerAuth

REPLY = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}]}
BODY = json.dumps(REPLY).encode()
KEY = "sk-upstream-0123456789"

# (request head, body, writer) -> None: answers one request however the test wants
Answer = Callable[[bytes, bytes, asyncio.StreamWriter], Awaitable[None]]


class RawServer:
    """An HTTP/1.1 server on raw sockets: each request is answered by ``answers[n]`` (the
    last one repeats); counts connections and requests, keeps the request heads."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = answers
        self.connections = 0
        self.heads: list[bytes] = []
        self.port = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                body = await reader.readexactly(length)
                self.heads.append(head)
                answer = self.answers[min(len(self.heads), len(self.answers)) - 1]
                await answer(head, body, writer)
                if writer.is_closing():
                    return
        finally:
            writer.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


@asynccontextmanager
async def raw_server(*answers: Answer) -> AsyncIterator[RawServer]:
    server = RawServer(*answers)
    listening = await asyncio.start_server(server.serve, "127.0.0.1", 0)
    server.port = listening.sockets[0].getsockname()[1]
    try:
        yield server
    finally:
        listening.close()


def chat(url: str, *, timeout: float | None = None, retries: int = 0) -> ChatSession:
    return ChatSession(
        loop_pool(),
        base_url=url,
        auth=StaticBearerAuth(KEY),
        context=ModelRequestContext(base_url=url, model="m", rollout_id="r1"),
        timeout=timeout,
        retries=retries,
        plain_http=True,
    )


async def call(url: str, **options: float | int | None) -> object:
    session = chat(url, **options)  # type: ignore[arg-type]
    try:
        return await session.complete({"model": "m", "messages": []})
    finally:
        await session.aclose()


async def with_length(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY))
    await writer.drain()


async def test_content_length_replies_reuse_one_connection() -> None:
    async with raw_server(with_length) as server:
        session = chat(server.url)
        try:
            assert await session.complete({"model": "m", "messages": []}) == REPLY
            assert await session.complete({"model": "m", "messages": []}) == REPLY
        finally:
            await session.aclose()
    assert server.connections == 1 and len(server.heads) == 2
    head = server.heads[0].decode()
    assert head.startswith("POST /v1/chat/completions HTTP/1.1\r\n")
    assert f"Authorization: Bearer {KEY}\r\n" in head
    assert f"Host: 127.0.0.1:{server.port}\r\n" in head


async def test_chunked_reply_with_extensions_and_trailers() -> None:
    async def chunked(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> None:
        first, second = BODY[:7], BODY[7:]
        writer.write(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            + b"%x;note=1\r\n%s\r\n" % (len(first), first)
        )
        await writer.drain()
        await asyncio.sleep(0.01)  # the rest in another read
        writer.write(b"%x\r\n%s\r\n0\r\nX-Trailer: t\r\n\r\n" % (len(second), second))
        await writer.drain()

    async with raw_server(chunked, with_length) as server:
        session = chat(server.url)
        try:
            assert await session.complete({"model": "m", "messages": []}) == REPLY
            assert await session.complete({"model": "m", "messages": []}) == REPLY
        finally:
            await session.aclose()
    assert server.connections == 1  # the chunked reply was read to its end: reused


async def test_reply_that_ends_when_the_server_closes() -> None:
    async def until_close(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + BODY)
        await writer.drain()
        writer.close()

    async with raw_server(until_close) as server:
        assert await call(server.url) == REPLY
        assert await call(server.url) == REPLY
    assert server.connections == 2  # never reused


async def test_gzip_body_is_decoded() -> None:
    async def gzipped(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> None:
        packed = gzip.compress(BODY)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s"
            % (len(packed), packed)
        )
        await writer.drain()

    async with raw_server(gzipped) as server:
        assert await call(server.url) == REPLY


async def test_interim_100_reply_is_skipped() -> None:
    async def interim(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        await with_length(head, body, writer)

    async with raw_server(interim) as server:
        assert await call(server.url) == REPLY


async def test_keepalive_connection_closed_between_calls_is_replaced() -> None:
    async def then_close(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> None:
        await with_length(head, body, writer)
        writer.close()  # no "Connection: close": the client learns it from the socket

    async with raw_server(then_close) as server:
        session = chat(server.url)
        try:
            for _ in range(3):
                assert await session.complete({"model": "m", "messages": []}) == REPLY
                await asyncio.sleep(0)  # the close may or may not have reached the loop
        finally:
            await session.aclose()
    assert server.connections == 3 and len(server.heads) == 3  # none sent twice


async def test_server_that_closes_before_replying_is_a_model_error() -> None:
    async def hang_up(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> None:
        writer.close()

    async with raw_server(hang_up) as server:
        failure = await call(server.url)
    assert isinstance(failure, CallFailure)
    assert failure.termination_reason == "model_error"
    assert "Server disconnected" in str(failure.error)
    assert len(server.heads) == 1  # a POST is never sent again by the client itself


async def test_server_that_closes_mid_reply_is_a_model_error() -> None:
    async def half(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + BODY[:10])
        await writer.drain()
        writer.close()

    async def half_chunked(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n20\r\n0123")
        await writer.drain()
        writer.close()

    for answer in (half, half_chunked):
        async with raw_server(answer) as server:
            failure = await call(server.url)
        assert isinstance(failure, CallFailure), answer
        assert "payload is not completed" in str(failure.error)


async def test_transient_failure_is_retried_on_a_new_connection() -> None:
    async def hang_up(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> None:
        writer.close()

    async with raw_server(hang_up, with_length) as server:
        assert await call(server.url, retries=1) == REPLY
    assert server.connections == 2


async def test_upstream_timeout_closes_the_connection() -> None:
    stalled = asyncio.Event()

    async def stall(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n{")
        await writer.drain()
        stalled.set()
        await asyncio.sleep(3600)

    async with raw_server(stall) as server:
        failure = await call(server.url, timeout=0.2)
        assert stalled.is_set()
    assert isinstance(failure, CallFailure)
    assert failure.termination_reason == "model_timeout"
    assert loop_pool().keepalive().idle_connections == 0


async def test_refused_connection_is_a_model_error() -> None:
    failure = await call("http://127.0.0.1:9/v1")
    assert isinstance(failure, CallFailure)
    assert failure.termination_reason == "model_error"
    assert "Cannot connect to host 127.0.0.1:9" in str(failure.error)


async def test_error_status_and_garbage_replies() -> None:
    async def refused(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> None:
        text = b'{"error":{"message":"no"}}'
        writer.write(
            b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 0\r\nContent-Length: %d\r\n\r\n%s"
            % (len(text), text)
        )
        await writer.drain()

    async def not_http(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(b"SSH-2.0-OpenSSH\r\n\r\n")
        await writer.drain()

    async with raw_server(refused) as server:
        failure = await call(server.url)
    assert isinstance(failure, CallFailure) and "Error code: 503" in str(failure.error)
    async with raw_server(not_http) as server:
        failure = await call(server.url)
    assert isinstance(failure, CallFailure) and "status line" in str(failure.error)


async def test_redirect_is_followed_by_the_general_client() -> None:
    async def redirected(request: web.Request) -> web.Response:
        return web.json_response(REPLY)

    app = web.Application()
    app.router.add_post("/v2/chat/completions", redirected)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    target = f"http://127.0.0.1:{runner.addresses[0][1]}/v2/chat/completions"

    async def moved(head: bytes, body: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(
            b"HTTP/1.1 307 Temporary Redirect\r\nLocation: %s\r\nContent-Length: 0\r\n\r\n"
            % target.encode()
        )
        await writer.drain()

    try:
        async with raw_server(moved) as server:
            assert await call(server.url) == REPLY
    finally:
        await runner.cleanup()
