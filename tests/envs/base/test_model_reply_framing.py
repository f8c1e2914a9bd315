"""How the chat call reads replies as real servers frame them (beyond.md §7):
content encodings, chunked and close-delimited bodies, ``Connection: close``,
redirects, a stream nobody asked for, empty, huge, non-UTF-8 and BOM bodies."""

from __future__ import annotations

import asyncio
import gzip
import json
import zlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from tests.envs.base.support import AnswerEnv, env_record, make_request_for_url

from benchmax._modelhttp.chat import ModelReplyError

GOOD = json.dumps(
    {
        "id": "c",
        "object": "chat.completion",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "42"}, "finish_reason": "stop"}
        ],
    }
).encode()

Reply = Callable[[int, bytes], bytes]
"""Builds the raw reply bytes from (request number, request line + path)."""


def reply(
    body: bytes, *headers: bytes, status: bytes = b"200 OK", version: bytes = b"1.1"
) -> bytes:
    head = b"HTTP/%s %s\r\n" % (version, status) + b"".join(h + b"\r\n" for h in headers)
    return head + b"\r\n" + body


def sized(body: bytes, *headers: bytes, **options: Any) -> bytes:
    return reply(
        body,
        b"Content-Type: application/json",
        b"Content-Length: %d" % len(body),
        *headers,
        **options,
    )


@asynccontextmanager
async def raw_server(
    answer: Reply, *, close_after: bool = False
) -> AsyncIterator[tuple[str, list[bytes], list[int]]]:
    """A server writing ``answer(n, request_line)`` for request ``n`` (1-based); keeps
    the connection open for more requests unless ``close_after``. Yields its base URL,
    the request lines it saw and the number of each connection a request came on."""
    lines: list[bytes] = []
    connections: list[int] = []
    opened = 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal opened
        opened += 1
        number = opened
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                length = 0
                for line in head.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                await reader.readexactly(length)
                lines.append(head.split(b"\r\n", 1)[0])
                connections.append(number)
                writer.write(answer(len(lines), lines[-1]))
                await writer.drain()
                if close_after:
                    return
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1", lines, connections
    finally:
        server.close()
        await server.wait_closed()


async def run(base_url: str, times: int = 1, **limits: Any) -> list[Any]:
    env = AnswerEnv(**limits)
    try:
        return [await env.run_rollout(make_request_for_url(base_url)) for _ in range(times)]
    finally:
        await env.aclose()


@pytest.mark.parametrize(
    ("encoding", "compress"),
    [(b"gzip", gzip.compress), (b"deflate", zlib.compress)],
)
async def test_a_compressed_reply_is_decoded(
    encoding: bytes, compress: Callable[[bytes], bytes]
) -> None:
    body = compress(GOOD)
    async with raw_server(lambda n, line: sized(body, b"Content-Encoding: " + encoding)) as (
        url,
        _,
        _,
    ):
        (rollout,) = await run(url)
    assert rollout.termination_reason == "finished"
    assert rollout.messages[-1]["content"] == "42"


async def test_a_chunked_reply_is_read_whole() -> None:
    chunks = [GOOD[:7], GOOD[7:30], GOOD[30:]]
    body = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"
    answer = reply(body, b"Content-Type: application/json", b"Transfer-Encoding: chunked")
    async with raw_server(lambda n, line: answer) as (url, lines, connections):
        rollouts = await run(url, times=2)
    assert [r.termination_reason for r in rollouts] == ["finished", "finished"]
    assert len(lines) == 2
    assert connections == [1, 1]  # the chunked reply ended cleanly: the connection is reused


async def test_after_connection_close_the_next_call_uses_a_new_connection() -> None:
    answer = sized(GOOD, b"Connection: close")
    async with raw_server(lambda n, line: answer, close_after=True) as (url, _, connections):
        rollouts = await run(url, times=3, model_retries=0)
    assert [r.termination_reason for r in rollouts] == ["finished"] * 3
    assert connections == [1, 2, 3]


async def test_an_http_1_0_reply_ending_at_close_is_read_whole() -> None:
    answer = reply(GOOD, b"Content-Type: application/json", version=b"1.0")
    async with raw_server(lambda n, line: answer, close_after=True) as (url, _, connections):
        rollouts = await run(url, times=2, model_retries=0)
    assert [r.termination_reason for r in rollouts] == ["finished", "finished"]
    assert [r.messages[-1]["content"] for r in rollouts] == ["42", "42"]
    assert connections == [1, 2]


@pytest.mark.parametrize(
    ("status", "method"),
    [(b"307 Temporary Redirect", b"POST"), (b"308 Permanent Redirect", b"POST")],
)
async def test_a_redirect_is_followed_like_the_sdk_client(status: bytes, method: bytes) -> None:
    def answer(n: int, line: bytes) -> bytes:
        if b"/moved/" in line:
            return sized(GOOD)
        return reply(
            b"", b"Location: /moved/v1/chat/completions", b"Content-Length: 0", status=status
        )

    async with raw_server(answer) as (url, lines, _):
        (rollout,) = await run(url)
    assert rollout.termination_reason == "finished"
    assert lines == [
        b"POST /v1/chat/completions HTTP/1.1",
        method + b" /moved/v1/chat/completions HTTP/1.1",
    ]


async def test_a_streamed_reply_nobody_asked_for_is_model_error_saying_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    event = b"data: " + GOOD + b"\n\ndata: [DONE]\n\n"
    answer = reply(event, b"Content-Type: text/event-stream", b"Content-Length: %d" % len(event))
    async with raw_server(lambda n, line: answer) as (url, lines, _):
        (rollout,) = await run(url, model_retries=2)
    assert rollout.termination_reason == "model_error"
    assert len(lines) == 1
    error = env_record(caplog).exc_info[1]
    assert isinstance(error, ModelReplyError)
    assert "text/event-stream" in str(error) and "stream" in str(error)


async def test_an_empty_200_body_is_model_error(caplog: pytest.LogCaptureFixture) -> None:
    async with raw_server(lambda n, line: sized(b"")) as (url, lines, _):
        (rollout,) = await run(url, model_retries=2)
    assert rollout.termination_reason == "model_error"
    assert len(lines) == 1
    error = env_record(caplog).exc_info[1]
    assert isinstance(error, ModelReplyError)
    assert "empty" in str(error)


async def test_a_huge_reply_is_read_whole() -> None:
    content = "x" * (24 * 1024 * 1024)
    body = json.dumps(
        {
            "choices": [
                {"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
            ]
        }
    ).encode()
    async with raw_server(lambda n, line: sized(body)) as (url, _, _):
        (rollout,) = await run(url)
    assert rollout.termination_reason == "finished"
    assert rollout.messages[-1]["content"] == content


async def test_a_non_utf8_body_is_model_error_naming_the_reply(
    caplog: pytest.LogCaptureFixture,
) -> None:
    body = GOOD.replace(b'"42"', b'"4\xe92"')  # Latin-1 é
    async with raw_server(lambda n, line: sized(body)) as (url, lines, _):
        (rollout,) = await run(url, model_retries=2)
    assert rollout.termination_reason == "model_error"
    assert len(lines) == 1
    error = env_record(caplog).exc_info[1]
    assert isinstance(error, ModelReplyError)
    assert "not JSON" in str(error)


@pytest.mark.parametrize("bom", [b"\xef\xbb\xbf"])
async def test_a_reply_starting_with_a_byte_order_mark_is_decoded(bom: bytes) -> None:
    async with raw_server(lambda n, line: sized(bom + GOOD)) as (url, _, _):
        (rollout,) = await run(url)
    assert rollout.termination_reason == "finished"
    assert rollout.messages[-1]["content"] == "42"
