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
    answer: Reply, *, close_after: bool = False, heads: list[bytes] | None = None
) -> AsyncIterator[tuple[str, list[bytes], list[int]]]:
    """A server writing ``answer(n, request_line)`` for request ``n`` (1-based); keeps
    the connection open for more requests unless ``close_after``. Yields its base URL,
    the request lines it saw and the number of each connection a request came on
    (``heads`` collects each request's whole head)."""
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
                if heads is not None:
                    heads.append(head)
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


async def test_a_raw_deflate_reply_is_decoded() -> None:
    packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)  # no zlib header, as some servers send
    body = packer.compress(GOOD) + packer.flush()
    async with raw_server(lambda n, line: sized(body, b"Content-Encoding: deflate")) as (url, _, _):
        (rollout,) = await run(url)
    assert rollout.termination_reason == "finished"


async def test_connection_close_is_honored_even_when_the_server_keeps_the_socket() -> None:
    answer = sized(GOOD, b"Connection: close")
    async with raw_server(lambda n, line: answer) as (url, _, connections):
        rollouts = await run(url, times=2, model_retries=0)
    assert [r.termination_reason for r in rollouts] == ["finished", "finished"]
    assert connections == [1, 2]


async def test_a_redirect_to_another_origin_drops_the_authorization_header() -> None:
    target_heads: list[bytes] = []
    async with raw_server(lambda n, line: sized(GOOD), heads=target_heads) as (target, _, _):
        location = target.encode() + b"/chat/completions"

        def moved(n: int, line: bytes) -> bytes:
            return reply(b"", b"Location: " + location, b"Content-Length: 0", status=b"307 X")

        origin_heads: list[bytes] = []
        async with raw_server(moved, heads=origin_heads) as (url, _, _):
            (rollout,) = await run(url)
    assert rollout.termination_reason == "finished"
    assert b"authorization: bearer k" in origin_heads[0].lower()
    assert b"authorization" not in target_heads[0].lower()


async def test_a_302_turns_the_post_into_a_get_as_the_sdk_client_did(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def answer(n: int, line: bytes) -> bytes:
        if line.startswith(b"GET "):
            return sized(b'{"error": {"message": "method not allowed"}}', status=b"405 X")
        return reply(b"", b"Location: /v1/chat/completions", b"Content-Length: 0", status=b"302 X")

    async with raw_server(answer) as (url, lines, _):
        (rollout,) = await run(url)
    assert rollout.termination_reason == "model_error"
    assert [line.split(b" ")[0] for line in lines] == [b"POST", b"GET"]
    assert "Error code: 405" in str(env_record(caplog).exc_info[1])


async def test_endless_redirects_are_model_error_and_not_retried(
    backoff_waits: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    def answer(n: int, line: bytes) -> bytes:
        return reply(b"", b"Location: /v1/chat/completions", b"Content-Length: 0", status=b"307 X")

    async with raw_server(answer) as (url, lines, _):
        (rollout,) = await run(url, model_retries=2)
    assert rollout.termination_reason == "model_error"
    assert backoff_waits == [] and len(lines) == 10  # aiohttp's limit, as httpx has one
    error = env_record(caplog).exc_info[1]
    assert isinstance(error, ModelReplyError)
    assert str(error).startswith("reply redirected too many times (")
    assert url + "/chat/completions" in str(error)


async def test_a_reply_cut_short_by_the_server_is_retried(backoff_waits: list[float]) -> None:
    def answer(n: int, line: bytes) -> bytes:
        if n == 1:  # promises more bytes than it sends, then closes
            return reply(GOOD[:20], b"Content-Length: %d" % len(GOOD), b"Connection: close")
        return sized(GOOD)

    async with raw_server(answer, close_after=True) as (url, lines, _):
        (rollout,) = await run(url, model_retries=1)
    assert rollout.termination_reason == "finished"
    assert len(lines) == 2 and len(backoff_waits) == 1
