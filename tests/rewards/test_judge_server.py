"""The judge end to end: real OpenAI SDK, real HTTP, ``MockModelServer`` on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from tests.conftest import LoopClock

from benchmax.auth import InjectedAuth, ModelRequestContext, StaticBearerAuth, bind_model_auth
from benchmax.rewards import Judge, JudgeError, Rubric, evaluate_single_rubric, score_rubrics
from benchmax.testing import Fault, MockModelServer


def server_judge(server: MockModelServer, **overrides: Any) -> Judge:
    fields: dict[str, Any] = {
        "model": "judge-model",
        "base_url": server.base_url,
        "auth": StaticBearerAuth("judge-secret"),
        "max_retries": 0,
    }
    fields.update(overrides)
    return Judge(**fields)


def answer(text: str):
    return lambda body: text


class CountingAuth:
    """Issues ``token-1``, ``token-2``, ... and records each resolution."""

    def __init__(self) -> None:
        self.contexts: list[ModelRequestContext] = []

    async def headers_for_request(self, context: ModelRequestContext) -> dict[str, str]:
        self.contexts.append(context)
        return {"Authorization": f"Bearer token-{len(self.contexts)}"}


async def test_bearer_auth_and_request_body_reach_the_server(mock_server: MockModelServer):
    mock_server.policy = answer('{"score": 1}')
    judge = server_judge(mock_server)
    parsed, raw = await judge.request_json("grade it", request_id="r", max_tokens=9)
    assert (parsed, raw) == ({"score": 1}, '{"score": 1}')
    (request,) = mock_server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer judge-secret"
    assert "judge-secret" not in repr(request)
    assert request.body["model"] == "judge-model"
    assert request.body["messages"] == [{"role": "user", "content": "grade it"}]
    assert request.body["temperature"] == 0.0
    assert request.body["max_tokens"] == 9


async def test_sequential_requests_reuse_one_pooled_connection(mock_server: MockModelServer):
    mock_server.policy = answer('{"score": 1}')
    judge = server_judge(mock_server)
    for _ in range(3):
        await judge.request_json("p", request_id="r")
    assert len({request.connection for request in mock_server.requests}) == 1


async def test_injected_auth_is_resolved_for_every_request(mock_server: MockModelServer):
    mock_server.policy = answer('{"score": 0}')
    provider = CountingAuth()
    judge = server_judge(mock_server, auth=InjectedAuth("judge"))
    with bind_model_auth({"judge": provider}):
        await judge.request_json("p", request_id="first")
        await judge.request_json("p", request_id="second")
    assert [r.headers["authorization"] for r in mock_server.requests] == [
        "Bearer token-1",
        "Bearer token-2",
    ]
    assert [c.rollout_id for c in provider.contexts] == ["first", "second"]
    assert provider.contexts[0] == ModelRequestContext(
        base_url=mock_server.base_url, model="judge-model", rollout_id="first"
    )


async def test_unbound_injected_auth_is_a_judge_error_without_a_request(
    mock_server: MockModelServer,
):
    judge = server_judge(mock_server, auth=InjectedAuth("missing"))
    with pytest.raises(JudgeError, match="No runtime model-auth provider"):
        await judge.request_json("p", request_id="r")
    assert mock_server.requests == []


@pytest.mark.parametrize("status", [401, 403])
async def test_auth_rejection_is_retried_with_fresh_credentials(
    mock_server: MockModelServer, status: int
):
    mock_server.policy = answer('{"score": 1}')
    mock_server.inject(Fault.status(status))
    provider = CountingAuth()
    judge = server_judge(mock_server, auth=InjectedAuth("judge"), auth_attempts=2)
    with bind_model_auth({"judge": provider}):
        parsed, _ = await judge.request_json("p", request_id="r")
    assert parsed == {"score": 1}
    assert [r.headers["authorization"] for r in mock_server.requests] == [
        "Bearer token-1",
        "Bearer token-2",
    ]


async def test_persistent_auth_rejection_becomes_judge_error(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture
):
    mock_server.inject(Fault.status(401, message="bad key"), times=None)
    judge = server_judge(mock_server, auth_attempts=2, max_retries=2)
    with pytest.raises(JudgeError, match="judge authentication failed") as raised:
        await judge.request_json("p", request_id="r")
    assert raised.value.termination_reason == "judge_error"
    assert "judge-secret" not in str(raised.value)
    assert "judge-secret" not in repr(judge)
    assert caplog.records and "judge-secret" not in caplog.text
    assert len(mock_server.requests) == 2  # 401s are not retried by the SDK itself


@pytest.mark.parametrize("token", ["judge-secret\n", "judge-secret ", "judge\x00secret"])
async def test_unsendable_token_is_a_judge_error_that_never_shows_it(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture, token: str
):
    caplog.set_level(logging.DEBUG)
    mock_server.policy = answer('{"score": 1}')
    judge = server_judge(mock_server, auth=StaticBearerAuth(token))
    with pytest.raises(JudgeError, match="invalid value for header 'Authorization'") as raised:
        await judge.request_json("p", request_id="r")
    assert "secret" not in str(raised.value)
    assert "secret" not in caplog.text
    assert mock_server.requests == []


async def test_server_error_is_a_judge_error(mock_server: MockModelServer):
    mock_server.inject(Fault.status(500), times=None)
    with pytest.raises(JudgeError, match="judge request failed"):
        await server_judge(mock_server).request_json("p", request_id="r")
    assert len(mock_server.requests) == 1


async def test_transient_errors_are_retried_by_the_sdk_and_reauthorized(
    mock_server: MockModelServer,
):
    mock_server.policy = answer('{"score": 1}')
    mock_server.inject(Fault.status(500, retry_after=0.01))
    provider = CountingAuth()
    judge = server_judge(mock_server, auth=InjectedAuth("judge"), max_retries=1)
    with bind_model_auth({"judge": provider}):
        assert (await judge.request_json("p", request_id="r"))[0] == {"score": 1}
    assert [r.headers["authorization"] for r in mock_server.requests] == [
        "Bearer token-1",
        "Bearer token-2",
    ]


async def test_timeout_is_a_judge_error(mock_server: MockModelServer):
    mock_server.inject(Fault.delay(3.0))
    judge = server_judge(mock_server, timeout=0.2)
    with pytest.raises(JudgeError, match="timed out"):
        await judge.request_json("p", request_id="r")


@pytest.mark.parametrize("fault", [Fault.malformed(), Fault.no_choices(), Fault.drop()])
async def test_broken_responses_are_judge_errors(mock_server: MockModelServer, fault: Fault):
    mock_server.inject(fault)
    with pytest.raises(JudgeError):
        await server_judge(mock_server).request_json("p", request_id="r")


@pytest.mark.parametrize(
    "content",
    [
        '```json\n{"score": 1, "reasoning": "fenced"}\n```',
        '<think>the score should be 0?</think>\n{"score": 1, "reasoning": "thought"}',
        'Here it is: {"score": 1, "reasoning": "prose"} done.',
    ],
)
async def test_wrapped_json_answers_are_accepted(mock_server: MockModelServer, content: str):
    mock_server.policy = answer(content)
    evaluation = await evaluate_single_rubric(
        Rubric("Quality", "Good."), question="q", response="r", judge=server_judge(mock_server)
    )
    assert evaluation.score == 1.0
    assert evaluation.raw_response == content


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("I cannot grade this.", "valid JSON object"),
        ('{"score": 0.5}', "not one of"),
        ('{"score": 2}', "not one of"),
        ('{"score": "2"}', "not one of"),
        ('{"score": "one"}', "numeric score"),
        ('{"reasoning": "missing"}', "numeric score"),
    ],
)
async def test_invalid_answers_are_judge_errors(
    mock_server: MockModelServer, content: str, fragment: str
):
    mock_server.policy = answer(content)
    with pytest.raises(JudgeError, match=fragment):
        await evaluate_single_rubric(
            Rubric("Quality", "Good."), question="q", response="r", judge=server_judge(mock_server)
        )


async def test_score_rubrics_end_to_end_reads_each_prompt(mock_server: MockModelServer):
    def policy(body: dict[str, Any]) -> str:
        prompt = body["messages"][0]["content"]
        present = "hallucination" in prompt  # flaw present; quality shown
        return json.dumps({"score": 1 if present or "quality" in prompt else 0})

    mock_server.policy = policy
    rewards = await score_rubrics(
        "r1",
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": "answer"}],
        ground_truth="reference",
        rubrics=[Rubric("quality", "d"), Rubric("hallucination", "d", polarity="negative")],
        question="q",
        judge=server_judge(mock_server),
    )
    assert rewards == {"rubric_quality": 1.0, "rubric_hallucination": 0.0}
    assert len(mock_server.requests) == 2
    assert all("reference" in r.body["messages"][0]["content"] for r in mock_server.requests)


async def test_judge_requests_share_the_loop_pool(
    mock_server: MockModelServer, monkeypatch: pytest.MonkeyPatch
):
    """After the loop's pool exists, judge requests build no connector, session or TLS context."""
    import ssl

    import aiohttp

    mock_server.policy = answer('{"score": 1}')
    judge = server_judge(mock_server)
    await judge.request_json("warm up", request_id="r")
    built: list[str] = []
    original_init = aiohttp.TCPConnector.__init__

    def counting_init(self: Any, *args: Any, **kwargs: Any) -> None:
        built.append("connector")
        original_init(self, *args, **kwargs)

    monkeypatch.setattr(aiohttp.TCPConnector, "__init__", counting_init)
    monkeypatch.setattr(ssl, "create_default_context", lambda *a, **k: built.append("tls"))
    for _ in range(3):
        assert (await judge.request_json("p", request_id="r"))[0] == {"score": 1}
    assert built == []
    assert len({request.connection for request in mock_server.requests}) == 1


async def test_a_server_dripping_its_reply_cannot_outlast_the_deadline(
    loop_clock: LoopClock,
) -> None:
    import asyncio

    sent: list[int] = []
    dripping = asyncio.Event()

    async def drip(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
            writer.write(b"Content-Length: 200\r\n\r\n")
            for _ in range(200):  # one byte every 50 ms: 10 s in all
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
    judge = Judge(
        model="m",
        base_url=f"http://127.0.0.1:{port}/v1",
        auth=StaticBearerAuth("k"),
        timeout=30,
        max_retries=0,
    )
    async with server:
        call = asyncio.create_task(judge.request_json("p", request_id="r"))
        await dripping.wait()  # every read is quick; only the total deadline can end it
        await loop_clock.advance(31)
        with pytest.raises(JudgeError, match=r"timed out after 30s"):
            await call
    assert 3 <= len(sent) < 100


class Waves:
    """A policy holding each call until ``width`` calls are in flight together, then
    letting that wave go: it reaches ``width`` only if that many run at once."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.in_flight = 0
        self.peak = 0
        self.wave = asyncio.Event()

    async def __call__(self, body: dict[str, Any]) -> str:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        wave = self.wave
        if self.in_flight == self.width:
            self.wave = asyncio.Event()
            wave.set()
        await asyncio.wait_for(wave.wait(), 60)
        self.in_flight -= 1
        return '{"score": 1}'


async def test_concurrent_requests_of_one_judge_are_capped(mock_server: MockModelServer):
    import asyncio

    mock_server.policy = waves = Waves(3)
    judge = server_judge(mock_server, max_concurrent_requests=3)
    equal = server_judge(mock_server, max_concurrent_requests=3)
    calls = [j.request_json("p", request_id=f"r{k}") for k in range(6) for j in (judge, equal)]
    await asyncio.gather(*calls)
    assert len(mock_server.requests) == 12
    assert waves.peak == 3  # equal judges share one cap
    other = server_judge(mock_server, max_concurrent_requests=5)
    mock_server.policy = waves = Waves(5)
    await asyncio.gather(*(other.request_json("p", request_id=f"o{k}") for k in range(10)))
    assert waves.peak == 5


async def test_environment_proxy_is_honored_by_judge_requests(
    monkeypatch: pytest.MonkeyPatch, make_mock_server: Any
):
    import asyncio

    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    target = await make_mock_server(answer('{"score": 0}'))
    proxy = await make_mock_server(answer('{"score": 1}'))
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")

    def score_in_new_loop() -> object:  # a new loop reads the environment afresh
        judge = server_judge(target)
        return asyncio.run(judge.request_json("p", request_id="r"))[0]["score"]

    assert await asyncio.to_thread(score_in_new_loop) == 1
    (proxied,) = proxy.requests
    assert proxied.path == f"http://127.0.0.1:{target.port}/v1/chat/completions"
    assert proxied.headers["authorization"] == "Bearer judge-secret"
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
    assert await asyncio.to_thread(score_in_new_loop) == 0
    assert len(target.requests) == 1 and len(proxy.requests) == 1
