"""model_timeout, tool_timeout, rollout_timeout and model_retries (beyond.md §2)."""

from __future__ import annotations

import asyncio
import email.utils
import logging
import time
from typing import Any

import pytest
from tests.conftest import LoopClock
from tests.envs.base.support import (
    AnswerEnv,
    CountingAuth,
    ToolEnv,
    fixed_response_server,
    make_request,
    tool_reply,
)
from tests.envs.base.test_model_failures import make_request_for_url

from benchmax._modelhttp import retries
from benchmax.testing import Fault, MockModelServer, scripted


class SlowToolEnv(ToolEnv):
    delay = 5.0

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        self.tool_calls.append((rollout_id, tool_name, tool_args))
        await asyncio.sleep(self.delay)
        return "late"


async def test_model_timeout_ends_rollout_keeping_completed_turns(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture, loop_clock: LoopClock
) -> None:
    # The first turn has 30 s however busy the machine is; the second never answers, and
    # the loop's clock is moved past the deadline once the server holds it.
    arrived, never = asyncio.Event(), asyncio.Event()

    async def second_turn_hangs(body: dict[str, Any]) -> Any:
        if len(body["messages"]) > 1:
            arrived.set()
            await never.wait()
        return tool_reply(("multiply", {"left": 6, "right": 7}))

    mock_server.policy = second_turn_hangs
    env = ToolEnv(model_timeout=30)
    group = asyncio.create_task(env.run_group([make_request(mock_server)]))
    await arrived.wait()
    await loop_clock.advance(31)
    outcomes = await group
    assert outcomes["rollout-0"].termination_reason == "model_timeout"
    assert outcomes["rollout-0"].rewards == {"correct": 0.0}
    assert len(mock_server.requests) == 2
    assert (
        "base.rollout.model_failed rollout_id=rollout-0 termination_reason=model_timeout"
        in caplog.messages
    )
    arrived.clear()
    task = asyncio.create_task(env.run_rollout(make_request(mock_server, "rollout-1")))
    await arrived.wait()
    await loop_clock.advance(31)
    rollout = await task
    assert rollout.termination_reason == "model_timeout"
    assert [m["role"] for m in rollout.messages] == ["user", "assistant", "tool"]
    await env.aclose()


async def test_default_timeout_without_model_timeout_is_model_error(
    mock_server: MockModelServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from benchmax._modelhttp import chat

    assert chat.DEFAULT_TIMEOUT_SECONDS == 600.0  # the OpenAI SDK's default
    # Stand-in for the 600 s default: the deadline fires while model_timeout is unset.
    monkeypatch.setattr(chat, "DEFAULT_TIMEOUT_SECONDS", 0.2)
    mock_server.inject(Fault.delay(3))
    env = AnswerEnv()
    rollout = await env.run_rollout(make_request(mock_server))
    assert rollout.termination_reason == "model_error"
    assert "model call exceeded the default timeout of 0.2s" in caplog.text
    await env.aclose()


async def test_tool_timeout(mock_server: MockModelServer, caplog: pytest.LogCaptureFixture) -> None:
    mock_server.policy = scripted([tool_reply(("multiply", {"left": 1, "right": 2}))])
    env = SlowToolEnv(tool_timeout=0.1)
    outcomes = await env.run_group([make_request(mock_server)])
    assert outcomes["rollout-0"].termination_reason == "tool_timeout"
    assert outcomes["rollout-0"].rewards == {"correct": 0.0}
    assert (
        "base.rollout.tool_failed rollout_id=rollout-0 termination_reason=tool_timeout: "
        "tool 'multiply' exceeded tool_timeout of 0.1s" in caplog.messages
    )
    rollout = await env.run_rollout(make_request(mock_server, "rollout-1"))
    assert [m["role"] for m in rollout.messages] == ["user", "assistant"]
    await env.aclose()


async def test_tool_raising_timeout_error_itself_is_tool_error(
    mock_server: MockModelServer,
) -> None:
    class RaisesTimeout(ToolEnv):
        async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
            raise TimeoutError("upstream API timed out")

    mock_server.policy = scripted([tool_reply(("multiply", {"left": 6, "right": 7}))])
    env = RaisesTimeout(tool_timeout=10)
    rollout = await env.run_rollout(make_request(mock_server))
    assert rollout.termination_reason == "tool_error"
    await env.aclose()


async def test_rollout_timeout_covers_model_calls_and_tools(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    mock_server.policy = scripted([tool_reply(("multiply", {"left": 6, "right": 7}))])
    env = SlowToolEnv(rollout_timeout=0.2, tool_timeout=10)
    outcomes = await env.run_group([make_request(mock_server)])
    assert outcomes["rollout-0"].termination_reason == "rollout_timeout"
    assert outcomes["rollout-0"].rewards == {"correct": 0.0}
    assert any(
        m.startswith(
            "base.rollout.timed_out rollout_id=rollout-0 termination_reason=rollout_timeout"
        )
        for m in caplog.messages
    )
    mock_server.inject(Fault.delay(5))
    rollout = await AnswerEnv(rollout_timeout=0.2).run_rollout(make_request(mock_server, "r-1"))
    assert rollout.termination_reason == "rollout_timeout"
    assert rollout.messages == [{"role": "user", "content": "What is 6 times 7?"}]


async def test_first_timeout_to_fire_wins(mock_server: MockModelServer) -> None:
    # Each pair of deadlines is armed in order, the shorter one on a call that never ends
    # in time: which fires first does not depend on the machine's speed.
    mock_server.policy = scripted([tool_reply(("multiply", {"left": 6, "right": 7}))])
    tool_first = SlowToolEnv(rollout_timeout=60, tool_timeout=0.1)
    tool_first.delay = 3600
    assert (await tool_first.run_rollout(make_request(mock_server))).termination_reason == (
        "tool_timeout"
    )
    mock_server.inject(Fault.delay(3600))
    model_first = AnswerEnv(rollout_timeout=60, model_timeout=0.1)
    assert (await model_first.run_rollout(make_request(mock_server, "r-1"))).termination_reason == (
        "model_timeout"
    )
    mock_server.inject(Fault.delay(3600))
    rollout_first = AnswerEnv(rollout_timeout=0.1, model_timeout=60)
    assert (
        await rollout_first.run_rollout(make_request(mock_server, "r-2"))
    ).termination_reason == "rollout_timeout"


async def test_rollout_timeout_excludes_compute_reward(
    mock_server: MockModelServer, loop_clock: LoopClock
) -> None:
    class SlowReward(AnswerEnv):
        async def compute_reward(self, rollout: Any) -> Any:
            await loop_clock.advance(120)  # two minutes pass while the reward is computed
            return {"correct": 1.0}

    rollout = await SlowReward(rollout_timeout=60).run_rollout(make_request(mock_server))
    assert rollout.termination_reason == "finished"
    assert rollout.rewards == {"correct": 1.0}


@pytest.mark.parametrize("status", [408, 409, 429, 500, 503])
async def test_transient_statuses_are_retried(
    mock_server: MockModelServer, backoff_waits: list[float], status: int
) -> None:
    mock_server.policy = scripted(["42"])
    mock_server.inject(Fault.status(status, message="try later"), times=2)
    auth = CountingAuth()
    env = AnswerEnv(model_retries=2)
    rollout = await env.run_rollout(make_request(mock_server, auth=auth))
    assert rollout.termination_reason == "finished"
    assert len(mock_server.requests) == 3
    assert len(backoff_waits) == 2
    assert [r.headers["authorization"] for r in mock_server.requests] == [
        "Bearer attempt-1",
        "Bearer attempt-2",
        "Bearer attempt-3",
    ]
    assert len(auth.contexts) == 3
    await env.aclose()


async def test_retries_exhausted_keep_last_reason(
    mock_server: MockModelServer, backoff_waits: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    mock_server.inject(Fault.status(500, message="still broken"), times=None)
    env = AnswerEnv(model_retries=3)
    rollout = await env.run_rollout(make_request(mock_server))
    assert rollout.termination_reason == "model_error"
    assert len(mock_server.requests) == 4
    retry_records = [r for r in caplog.records if "model_retry" in r.getMessage()]
    assert len(retry_records) == 3
    assert all(r.levelno == logging.WARNING for r in retry_records)
    assert retry_records[0].getMessage().startswith("base.rollout.model_retry rollout_id=rollout-0")
    assert "still broken" in retry_records[0].getMessage()
    await env.aclose()


async def test_bad_request_is_never_retried(
    mock_server: MockModelServer, backoff_waits: list[float]
) -> None:
    mock_server.inject(Fault.status(400, error_code="context_budget_exceeded"), times=None)
    env = AnswerEnv(model_retries=5)
    rollout = await env.run_rollout(make_request(mock_server))
    assert rollout.termination_reason == "context_exceeded"
    assert len(mock_server.requests) == 1 and backoff_waits == []
    mock_server.clear_faults()
    mock_server.inject(Fault.status(401, message="bad key"), times=None)
    rollout = await env.run_rollout(make_request(mock_server, "rollout-1"))
    assert rollout.termination_reason == "model_error"
    assert len(mock_server.requests_for("rollout-1")) == 1
    await env.aclose()


async def test_connection_failures_and_timeouts_are_retried(
    mock_server: MockModelServer, backoff_waits: list[float], loop_clock: LoopClock
) -> None:
    # Attempts that must succeed have 30 s; an attempt that must time out is held by the
    # server until the loop's clock is moved past its deadline.
    arrived, never = asyncio.Event(), asyncio.Event()
    hang = [True]

    async def hangs_then_answers(body: dict[str, Any]) -> str:
        if hang[0]:
            hang[0] = body["messages"][0]["content"] == "always hang"
            arrived.set()
            await never.wait()
        return "42"

    mock_server.policy = hangs_then_answers
    mock_server.inject(Fault.drop())
    env = AnswerEnv(model_retries=2, model_timeout=30)
    task = asyncio.create_task(env.run_rollout(make_request(mock_server)))
    await arrived.wait()
    await loop_clock.advance(31)
    rollout = await task
    assert rollout.termination_reason == "finished"
    assert len(mock_server.requests) == 3
    assert len(backoff_waits) == 2

    hang[0] = True
    arrived.clear()
    payload = {"prompt_messages": [{"role": "user", "content": "always hang"}], "answer": "42"}
    task = asyncio.create_task(
        env.run_rollout(make_request(mock_server, "rollout-1", payload=payload))
    )
    for _ in range(3):  # the first attempt and both retries time out
        await arrived.wait()
        arrived.clear()
        await loop_clock.advance(31)
    rollout = await task
    assert rollout.termination_reason == "model_timeout"
    assert len(mock_server.requests_for("rollout-1")) == 3
    await env.aclose()


async def test_auth_failure_is_not_retried(
    mock_server: MockModelServer, backoff_waits: list[float]
) -> None:
    class Broken:
        async def headers_for_request(self, context: object) -> dict[str, str]:
            raise RuntimeError("vault sealed")

    env = AnswerEnv(model_retries=3)
    rollout = await env.run_rollout(make_request(mock_server, auth=Broken()))
    assert rollout.termination_reason == "model_error"
    assert mock_server.requests == [] and backoff_waits == []


async def test_retry_after_is_honored(
    mock_server: MockModelServer, backoff_waits: list[float]
) -> None:
    mock_server.policy = scripted(["42"])
    mock_server.inject(Fault.status(429, retry_after=7), times=1)
    mock_server.inject(Fault.status(503, retry_after=3600), times=1)
    env = AnswerEnv(model_retries=2)
    rollout = await env.run_rollout(make_request(mock_server))
    assert rollout.termination_reason == "finished"
    assert backoff_waits == [7.0, 60.0]
    await env.aclose()


async def test_backoff_sleeps_for_real_by_default(mock_server: MockModelServer) -> None:
    mock_server.policy = scripted(["42"])
    mock_server.inject(Fault.status(429, retry_after=0.3))
    env = AnswerEnv(model_retries=1)
    started = time.monotonic()
    rollout = await env.run_rollout(make_request(mock_server))
    assert rollout.termination_reason == "finished"
    assert time.monotonic() - started >= 0.3
    await env.aclose()


def test_retry_delay_is_exponential_with_jitter_and_capped() -> None:
    for retry, ceiling in [(1, 0.5), (2, 1.0), (3, 2.0), (7, 30.0), (20, 30.0)]:
        delays = [retries.retry_delay(retry, None) for _ in range(200)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert len(set(delays)) > 1
    assert retries.retry_delay(1, 12.5) == 12.5
    assert retries.retry_delay(1, 0.0) == 0.0
    assert retries.retry_delay(4, 120.0) == 60.0


@pytest.mark.parametrize(
    ("retry_after", "low", "high"),
    [
        (b"soon", 0.25, 0.5),  # unusable: ordinary backoff
        (b"", 0.25, 0.5),
        (b"Wed, 21 Oct 2015 07:28:00 GMT", 0.0, 0.0),  # a past date: at once
        (None, 10.0, 30.5),  # an HTTP date 30 s ahead (to the second; less what passed)
    ],
)
async def test_retry_after_forms(
    backoff_waits: list[float], retry_after: bytes | None, low: float, high: float
) -> None:
    if retry_after is None:
        retry_after = email.utils.formatdate(time.time() + 30, usegmt=True).encode()
    body = b'{"error": {"message": "slow down"}}'
    headers = b"Retry-After: %s\r\n" % retry_after
    async with fixed_response_server(429, body, headers=headers) as origin:
        request = make_request_for_url(f"{origin}/v1")
        rollout = await AnswerEnv(model_retries=1).run_rollout(request)
    assert rollout.termination_reason == "model_error"
    (wait,) = backoff_waits
    assert low <= wait <= high
