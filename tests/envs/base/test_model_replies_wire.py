"""The chat call's wire rules beyond 0.2 (beyond.md §2, §7): error objects in 200
replies, the server's retry verdicts, reply decoding (benchmax._modelhttp.chat)."""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from tests.conftest import LoopClock
from tests.envs.base.support import AnswerEnv, env_record, make_request_for_url

from benchmax._modelhttp import json_codec
from benchmax._modelhttp.chat import ModelReplyError, ModelStatusError
from benchmax.envs.shared_types import Example

GOOD = {
    "id": "c",
    "object": "chat.completion",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "42"}, "finish_reason": "stop"}
    ],
}


@asynccontextmanager
async def replies_server(
    *replies: tuple[int, bytes, bytes],
) -> AsyncIterator[tuple[str, list[bytes]]]:
    """A server answering successive requests with ``(status, body, extra header lines)``
    (the last one repeats); yields its base URL and the request bodies it received."""
    import asyncio

    bodies: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            bodies.append(await reader.readexactly(length))
            status, body, headers = replies[min(len(bodies), len(replies)) - 1]
            writer.write(
                b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                b"Connection: close\r\n%s\r\n%s" % (status, len(body), headers, body)
            )
            await writer.drain()
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1", bodies
    finally:
        server.close()
        await server.wait_closed()


def error_reply(error: Any) -> tuple[int, bytes, bytes]:
    return (200, json.dumps({"error": error}).encode(), b"")


async def run(base_url: str, **limits: Any) -> Any:
    env = AnswerEnv(**limits)
    try:
        return await env.run_rollout(make_request_for_url(base_url))
    finally:
        await env.aclose()


@pytest.mark.parametrize(
    "error",
    [
        {"message": "slow down", "code": "rate_limit_exceeded"},
        {"message": "slow down", "type": "rate_limit_error"},
        {"message": "slow down", "code": 429},
        {"message": "slow down", "status": "503"},
    ],
)
async def test_a_200_error_object_naming_a_transient_failure_is_retried(
    backoff_waits: list[float], caplog: pytest.LogCaptureFixture, error: dict[str, Any]
) -> None:
    async with replies_server(error_reply(error), (200, json.dumps(GOOD).encode(), b"")) as (
        url,
        bodies,
    ):
        rollout = await run(url, model_retries=1)
    assert rollout.termination_reason == "finished"
    assert len(bodies) == 2 and len(backoff_waits) == 1
    (retry,) = [r for r in caplog.records if "model_retry" in r.getMessage()]
    assert "reply carried an error object" in retry.getMessage()
    assert "slow down" in retry.getMessage()


async def test_a_200_error_object_without_retries_is_model_error_with_its_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reply = error_reply({"message": "upstream quota exhausted", "code": "rate_limit"})
    async with replies_server(reply) as (url, bodies):
        rollout = await run(url)
    assert rollout.termination_reason == "model_error"
    assert len(bodies) == 1
    record = env_record(caplog)
    assert isinstance(record.exc_info[1], ModelStatusError)
    assert record.exc_info[1].status == 429
    assert "upstream quota exhausted" in caplog.text


@pytest.mark.parametrize(
    ("error", "reason", "level"),
    [
        ({"message": "too long", "code": "context_budget_exceeded"}, "context_exceeded", 30),
        ({"message": "bad", "code": 400}, "model_error", 30),
        ({"message": "nothing said about status"}, "model_error", 40),
        ("a plain string error", "model_error", 40),
    ],
)
async def test_200_error_objects_that_are_not_transient_are_never_retried(
    backoff_waits: list[float],
    caplog: pytest.LogCaptureFixture,
    error: Any,
    reason: str,
    level: int,
) -> None:
    async with replies_server(error_reply(error)) as (url, bodies):
        rollout = await run(url, model_retries=3)
    assert rollout.termination_reason == reason
    assert len(bodies) == 1 and backoff_waits == []
    assert env_record(caplog).levelno == level


async def test_a_reply_with_choices_and_an_error_member_is_a_reply() -> None:
    body = json.dumps({**GOOD, "error": None}).encode()
    async with replies_server((200, body, b"")) as (url, _):
        assert (await run(url)).termination_reason == "finished"


@pytest.mark.parametrize(
    ("status", "header", "retried"),
    [
        (500, b"x-should-retry: false\r\n", False),
        (429, b"X-Should-Retry: false\r\n", False),
        (404, b"x-should-retry: true\r\n", True),
        (400, b"x-should-retry: true\r\n", False),  # a 400 is never retried
        (404, b"", False),
        (503, b"x-should-retry: maybe\r\n", True),
    ],
)
async def test_the_servers_retry_verdict_is_honored(
    backoff_waits: list[float], status: int, header: bytes, retried: bool
) -> None:
    failure = (status, b'{"error": {"message": "no"}}', header)
    async with replies_server(failure, (200, json.dumps(GOOD).encode(), b"")) as (url, bodies):
        rollout = await run(url, model_retries=1)
    assert (rollout.termination_reason == "finished") is retried
    assert len(bodies) == 1 + retried


# What llama-cpp-python's server answers (HTTP 500, its RouteErrorHandler wrapping
# FastAPI's RequestValidationError) for an assistant message whose content is null.
LLAMA_CPP_VALIDATION_500 = json.dumps(
    {
        "error": {
            "message": "1 validation error:\n  {'type': 'string_type', 'loc': ('body',"
            " 'messages', 1, 'typed-dict', 'content'), 'msg': 'Input should be a valid"
            " string', 'input': None}",
            "type": "internal_server_error",
            "param": None,
            "code": None,
        }
    }
).encode()


@pytest.mark.parametrize(
    ("body", "header", "retried"),
    [
        (LLAMA_CPP_VALIDATION_500, b"", False),
        (b"2 validation errors for CreateChatCompletionRequest", b"", False),
        (LLAMA_CPP_VALIDATION_500, b"x-should-retry: true\r\n", True),  # the server's verdict
        (b'{"error": {"message": "worker crashed"}}', b"", True),
        (b'{"error": {"message": "validation of the cache failed"}}', b"", True),
    ],
)
async def test_a_5xx_saying_the_request_failed_validation_is_not_retried(
    backoff_waits: list[float],
    caplog: pytest.LogCaptureFixture,
    body: bytes,
    header: bytes,
    retried: bool,
) -> None:
    failure = (500, body, header)
    async with replies_server(failure, (200, json.dumps(GOOD).encode(), b"")) as (url, bodies):
        rollout = await run(url, model_retries=2)
    assert len(bodies) == 1 + retried
    if not retried:
        assert rollout.termination_reason == "model_error" and backoff_waits == []
        assert "validation error" in str(env_record(caplog).exc_info[1])
    else:
        assert rollout.termination_reason == "finished"


async def test_retry_after_ms_wins_over_retry_after(backoff_waits: list[float]) -> None:
    failure = (429, b"{}", b"Retry-After-Ms: 1500\r\nRetry-After: 9\r\n")
    async with replies_server(failure, (200, json.dumps(GOOD).encode(), b"")) as (url, _):
        assert (await run(url, model_retries=1)).termination_reason == "finished"
    assert backoff_waits == [1.5]


async def test_a_non_json_reply_is_model_error_and_not_retried(
    backoff_waits: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    async with replies_server((200, b"<html>gateway</html>", b"")) as (url, bodies):
        rollout = await run(url, model_retries=2)
    assert rollout.termination_reason == "model_error"
    assert len(bodies) == 1 and backoff_waits == []
    assert isinstance(env_record(caplog).exc_info[1], ModelReplyError)
    assert "gateway" in caplog.text


async def test_lone_surrogates_in_a_reply_are_decoded() -> None:
    message = {"role": "assistant", "content": "x\ud800y"}
    reply = json.dumps(
        {"choices": [{"message": message, "finish_reason": "stop"}]}
    ).encode()  # json.dumps escapes the lone surrogate as \\ud800
    assert b"\\ud800" in reply
    async with replies_server((200, reply, b"")) as (url, _):
        rollout = await run(url)
    assert rollout.termination_reason == "finished"
    assert rollout.messages[-1]["content"] == "x\ud800y"


def test_codec_falls_back_to_json_for_what_orjson_refuses() -> None:
    assert json_codec.decode(b'"\\ud800"') == "\ud800"
    assert json_codec.decode(b"[NaN]")[0] != json_codec.decode(b"[NaN]")[0]
    assert json_codec.decode(b"[1e400]") == [float("inf")]
    assert json_codec.decode(b'{"a": [1, "\xc3\xa9"]}') == {"a": [1, "é"]}
    with pytest.raises(ValueError):
        json_codec.decode(b"{not json")
    with pytest.raises(ValueError):
        json_codec.decode(b"\xff\xfe\xfd")
    assert json_codec.encode({"a": "é", "b": [1, None]}) == '{"a":"é","b":[1,null]}'.encode()
    assert json_codec.encode({"n": 2**70}) == b'{"n":1180591620717411303424}'
    assert json_codec.encode({1: "x"}) == b'{"1":"x"}'
    assert json_codec.encode("\ud800") == b'"\\ud800"'
    with pytest.raises(TypeError):
        json_codec.encode({"s": {1, 2}})


async def test_an_unencodable_body_is_model_error_without_a_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    payload = {"prompt_messages": [{"role": "user", "content": {1, 2}}]}
    async with replies_server((200, json.dumps(GOOD).encode(), b"")) as (url, bodies):
        request = make_request_for_url(url)
        request = dataclasses.replace(request, example=Example(id="e", payload=payload))
        rollout = await AnswerEnv().run_rollout(request)
    assert rollout.termination_reason == "model_error"
    assert bodies == []
    assert env_record(caplog).levelno == logging.ERROR


async def test_model_timeout_bounds_a_reply_dripped_a_byte_at_a_time(
    caplog: pytest.LogCaptureFixture, loop_clock: LoopClock
) -> None:
    import asyncio

    sent: list[int] = []
    dripping = asyncio.Event()

    async def drip(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 200\r\n\r\n")
            for _ in range(200):  # one byte every 50 ms: 10 s in all, each read quick
                writer.write(b" ")
                await writer.drain()
                sent.append(1)
                if len(sent) == 3:
                    dripping.set()
                await asyncio.sleep(0.05)
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(drip, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        call = asyncio.create_task(run(f"http://127.0.0.1:{port}/v1", model_timeout=30))
        await dripping.wait()  # reads keep arriving; only the total deadline can end it
        await loop_clock.advance(31)
        rollout = await call
    assert rollout.termination_reason == "model_timeout"
    assert 3 <= len(sent) < 100
    assert "model call exceeded model_timeout of 30s" in caplog.text
