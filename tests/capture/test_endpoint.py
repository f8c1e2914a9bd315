"""The capture endpoint against the real mock model server: attribution by path and key,
exact tokens, event streams, refusals, budgets and secrets."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import aiohttp
import openai
import pytest
from aiohttp import web

from benchmax.capture import CaptureEndpoint, CaptureSession
from benchmax.envs import StaticBearerAuth
from benchmax.testing import MockModelServer, echo, scripted

UPSTREAM_KEY = "sk-upstream-never-shown-0123456789"


@pytest.fixture
async def token_mock() -> AsyncIterator[MockModelServer]:
    async with MockModelServer(echo, tokens=True) as server:
        yield server


@pytest.fixture
async def endpoint() -> AsyncIterator[CaptureEndpoint]:
    async with CaptureEndpoint() as started:
        yield started


def _session(
    endpoint: CaptureEndpoint, upstream: MockModelServer, rollout_id: str = "r1", **kw: object
) -> CaptureSession:
    return endpoint.open_session(
        rollout_id=rollout_id,
        model="policy",
        upstream_url=upstream.base_url,
        upstream_auth=StaticBearerAuth(UPSTREAM_KEY),
        **kw,  # type: ignore[arg-type]
    )


_CLIENTS: list[openai.AsyncOpenAI] = []


@pytest.fixture(autouse=True)
async def _close_clients() -> AsyncIterator[None]:
    """Close each test's SDK clients on its own loop: one left to the garbage collector
    schedules its close on whatever loop runs next (a later test's), where it fails."""
    yield
    while _CLIENTS:
        await _CLIENTS.pop().close()


def _client(session: CaptureSession, *, base_url: str | None = None) -> openai.AsyncOpenAI:
    client = openai.AsyncOpenAI(
        base_url=base_url or session.base_url, api_key=session.api_key, max_retries=0
    )
    _CLIENTS.append(client)
    return client


async def test_call_is_recorded_with_exact_tokens(
    endpoint: CaptureEndpoint, token_mock: MockModelServer
) -> None:
    session = _session(endpoint, token_mock)
    reply = await _client(session).chat.completions.create(
        model="policy", messages=[{"role": "user", "content": "hello"}]
    )
    assert reply.choices[0].message.content == "hello"
    (call,) = session.calls
    assert call.request["messages"] == [{"role": "user", "content": "hello"}]
    assert call.message["content"] == "hello"
    # the toy tokenizer: one token per character, id 100 + code point, then <|im_end|>
    assert call.tokens.completion_token_ids[:5] == tuple(100 + ord(c) for c in "hello")
    assert len(call.tokens.completion_logprobs) == len(call.tokens.completion_token_ids)
    record = call.model_call()
    assert record.has_tokens and record.finish_reason == "stop"
    # the upstream was asked for tokens, without streaming, with its own credential
    (sent,) = token_mock.requests
    assert sent.body["logprobs"] is True and sent.body["return_token_ids"] is True
    assert "stream" not in sent.body
    assert sent.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
    # the program got no token fields it did not ask for
    assert reply.choices[0].logprobs is None
    assert "prompt_token_ids" not in (reply.model_extra or {})


async def test_stream_to_the_program_from_a_whole_reply(
    endpoint: CaptureEndpoint, token_mock: MockModelServer
) -> None:
    session = _session(endpoint, token_mock)
    stream = await _client(session).chat.completions.create(
        model="policy",
        messages=[{"role": "user", "content": "streamed words"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    text, finish, usage = "", None, None
    async for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
    assert (text, finish) == ("streamed words", "stop")
    assert usage is not None and usage.completion_tokens > 0
    assert session.calls[0].streamed
    assert "stream" not in token_mock.requests[0].body


async def test_streamed_tool_calls_reach_the_sdk(
    endpoint: CaptureEndpoint, token_mock: MockModelServer
) -> None:
    token_mock.policy = scripted([{"tool_calls": [{"name": "add", "arguments": {"a": 1}}]}])
    session = _session(endpoint, token_mock)
    stream = await _client(session).chat.completions.create(
        model="policy", messages=[{"role": "user", "content": "add"}], stream=True
    )
    calls = [
        tool
        async for chunk in stream
        for choice in chunk.choices
        for tool in choice.delta.tool_calls or ()
    ]
    assert [c.function.name for c in calls] == ["add"]
    assert json.loads(calls[0].function.arguments or "") == {"a": 1}


async def test_program_attributed_by_key_on_the_shared_url(
    endpoint: CaptureEndpoint, token_mock: MockModelServer
) -> None:
    first, second = _session(endpoint, token_mock, "r1"), _session(endpoint, token_mock, "r2")
    client = _client(second, base_url=endpoint.base_url)
    await client.chat.completions.create(
        model="policy", messages=[{"role": "user", "content": "x"}]
    )
    assert (len(first.calls), len(second.calls)) == (0, 1)
    models = await client.models.list()
    assert [m.id for m in models.data] == ["policy"]


@pytest.mark.parametrize("key", ["wrong", None, "foreign"])
async def test_wrong_or_foreign_key_is_401_and_counted(
    endpoint: CaptureEndpoint, token_mock: MockModelServer, key: str | None
) -> None:
    mine, other = _session(endpoint, token_mock, "r1"), _session(endpoint, token_mock, "r2")
    headers = (
        {}
        if key is None
        else {"Authorization": f"Bearer {other.api_key if key == 'foreign' else key}"}
    )
    async with aiohttp.ClientSession() as http:
        async with http.post(
            mine.base_url + "/chat/completions",
            json={"model": "policy", "messages": [{"role": "user", "content": "x"}]},
            headers=headers,
        ) as reply:
            assert reply.status == 401
            body = await reply.json()
    assert body["error"]["code"] == "invalid_api_key"
    assert endpoint.rejected_requests == 1
    assert not mine.calls and not other.calls and not token_mock.requests


async def test_closed_session_key_is_refused(
    endpoint: CaptureEndpoint, token_mock: MockModelServer
) -> None:
    session = _session(endpoint, token_mock)
    await endpoint.close_session(session)
    with pytest.raises(openai.AuthenticationError):
        await _client(session).chat.completions.create(
            model="policy", messages=[{"role": "user", "content": "x"}]
        )
    assert endpoint.rejected_requests == 1


async def test_upstream_without_tokens_is_refused_in_one_line(endpoint: CaptureEndpoint) -> None:
    async with MockModelServer(echo) as plain:
        session = _session(endpoint, plain)
        with pytest.raises(openai.APIStatusError) as raised:
            await _client(session).chat.completions.create(
                model="policy", messages=[{"role": "user", "content": "x"}]
            )
    assert raised.value.status_code == 502
    message = raised.value.body["message"]  # type: ignore[index]
    assert "needs exact token ids and logprobs" in message and "\n" not in message
    assert session.failure is not None and session.failure.termination_reason == "model_error"
    assert session.ended.is_set() and not session.calls


async def test_wrong_model_name_ends_the_rollout(
    endpoint: CaptureEndpoint, token_mock: MockModelServer
) -> None:
    session = _session(endpoint, token_mock)
    with pytest.raises(openai.NotFoundError):
        await _client(session).chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "x"}]
        )
    assert session.failure is not None and session.failure.termination_reason == "wrong_model"
    assert not token_mock.requests


async def test_call_budget_and_token_budget(
    endpoint: CaptureEndpoint, token_mock: MockModelServer
) -> None:
    calls = _session(endpoint, token_mock, "calls", max_calls=1)
    client = _client(calls)
    message = [{"role": "user", "content": "x"}]
    await client.chat.completions.create(model="policy", messages=message)  # type: ignore[arg-type]
    with pytest.raises(openai.RateLimitError):
        await client.chat.completions.create(model="policy", messages=message)  # type: ignore[arg-type]
    assert calls.failure is not None and calls.failure.termination_reason == "max_turns_exceeded"
    tokens = _session(endpoint, token_mock, "tokens", max_sampled_tokens=3)
    await _client(tokens).chat.completions.create(
        model="policy", messages=[{"role": "user", "content": "more than three"}]
    )
    assert tokens.failure is not None and tokens.failure.termination_reason == "output_exceeded"


async def test_sampling_args_override_the_program(
    endpoint: CaptureEndpoint, token_mock: MockModelServer
) -> None:
    session = _session(endpoint, token_mock, sampling_args={"temperature": 0.25})
    await _client(session).chat.completions.create(
        model="policy", messages=[{"role": "user", "content": "x"}], temperature=1.5
    )
    assert token_mock.requests[0].body["temperature"] == 0.25
    assert session.calls[0].request["temperature"] == 1.5  # what the program sent


async def test_weights_version_is_recorded(endpoint: CaptureEndpoint) -> None:
    """A sampler that names the weights version (benchmax train's does) has it recorded;
    the program does not see the field."""

    async def answer(request: web.Request) -> web.Response:
        return web.json_response(
            {
                "id": "c1",
                "object": "chat.completion",
                "model": "policy",
                "prompt_token_ids": [1, 2, 3],
                "weights_version": 7,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "ok"},
                        "finish_reason": "stop",
                        "token_ids": [9, 10],
                        "logprobs": {"content": [{"token": "o", "logprob": -0.5}] * 2},
                    }
                ],
            }
        )

    app = web.Application()
    app.router.add_post("/v1/chat/completions", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        session = endpoint.open_session(
            rollout_id="r1",
            model="policy",
            upstream_url=f"http://127.0.0.1:{port}/v1",
            upstream_auth=StaticBearerAuth(UPSTREAM_KEY),
        )
        reply = await _client(session).chat.completions.create(
            model="policy", messages=[{"role": "user", "content": "x"}]
        )
    finally:
        await runner.cleanup()
    (call,) = session.calls
    assert call.weights_version == 7
    assert call.tokens.prompt_token_ids == (1, 2, 3)
    assert "weights_version" not in (reply.model_extra or {})


def test_secrets_never_in_reprs() -> None:
    endpoint = CaptureEndpoint()
    assert "not started" in repr(endpoint)
    with pytest.raises(ValueError, match="port must be an integer"):
        CaptureEndpoint(port=70000)


async def test_session_repr_masks_the_key(
    endpoint: CaptureEndpoint, token_mock: MockModelServer
) -> None:
    session = _session(endpoint, token_mock)
    assert session.api_key not in repr(session) and UPSTREAM_KEY not in repr(session)


@pytest.mark.parametrize(
    "raw",
    [
        b"{not json",
        bytes(range(256)),
        b"[" * 100_000 + b"]" * 100_000,  # nesting deeper than the JSON decoder recurses
        b'{"model":"policy","messages":[{"role":"user","content":"x"}],"temperature":NaN}',
    ],
    ids=["malformed", "binary", "deeply_nested", "nan"],
)
async def test_body_that_is_not_strict_json_is_400(
    endpoint: CaptureEndpoint, token_mock: MockModelServer, raw: bytes
) -> None:
    session = _session(endpoint, token_mock)
    async with aiohttp.ClientSession() as http:
        async with http.post(
            session.base_url + "/chat/completions",
            data=raw,
            headers={"Authorization": f"Bearer {session.api_key}"},
        ) as reply:
            assert reply.status == 400
            body = await reply.json()
    assert body["error"]["code"] == "invalid_json"
    assert not session.calls and not token_mock.requests and session.failure is None


async def test_upstream_error_echoing_its_credential_is_masked(endpoint: CaptureEndpoint) -> None:
    async def echo_the_key(request: web.Request) -> web.Response:
        given = request.headers.get("Authorization", "")
        return web.json_response({"error": {"message": f"bad key: {given}"}}, status=401)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", echo_the_key)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        session = endpoint.open_session(
            rollout_id="r1",
            model="policy",
            upstream_url=f"http://127.0.0.1:{port}/v1",
            upstream_auth=StaticBearerAuth(UPSTREAM_KEY),
        )
        async with aiohttp.ClientSession() as http:
            async with http.post(
                session.base_url + "/chat/completions",
                json={"model": "policy", "messages": [{"role": "user", "content": "x"}]},
                headers={"Authorization": f"Bearer {session.api_key}"},
            ) as reply:
                assert reply.status == 502
                text = await reply.text()
    finally:
        await runner.cleanup()
    assert "bad key: Bearer ***" in text  # the upstream's words reach the program, masked
    assert session.failure is not None
    assert UPSTREAM_KEY not in text and UPSTREAM_KEY not in session.failure.message


async def test_body_over_the_limit_is_refused_before_it_is_read(
    endpoint: CaptureEndpoint, token_mock: MockModelServer
) -> None:
    session = _session(endpoint, token_mock)
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", int(endpoint.origin.rsplit(":", 1)[1])
    )
    writer.write(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        + f"Authorization: Bearer {session.api_key}\r\n".encode()
        + b"Content-Type: application/json\r\nContent-Length: 70000000\r\n\r\n{"
    )
    await writer.drain()
    status = await asyncio.wait_for(reader.readline(), 60)
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 60)
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    body = json.loads(await reader.readexactly(length))
    writer.close()
    assert status.split()[1] == b"413"
    assert body["error"]["code"] == "request_too_large"
    assert session.calls == ()
