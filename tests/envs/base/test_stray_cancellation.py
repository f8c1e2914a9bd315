"""beyond.md §9 "Stray cancellation" and "rollout_context setup failure".

A ``CancelledError`` raised by user code while its task is not being cancelled is the
failure of that hook (``tool_error``, ``reward_error``, ``group_reward_error``,
``judge_error``, ``setup_error``); a real cancellation (the run stopping, a timeout)
still propagates or times out as before. ``rollout_context`` failing to set up settles
that rollout as ``setup_error`` (zero rewards, no model call) and its siblings finish;
an exception on exit is logged, never raised over the outcome.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest
from tests.envs.base.support import AnswerEnv, ToolEnv, make_request, tool_reply

from benchmax.envs.base.env import BaseRollout
from benchmax.envs.shared_types import Example, RewardMap, RolloutFailure
from benchmax.rewards import Judge, JudgeError
from benchmax.testing import MockModelServer, scripted


async def _cancel_a_child() -> None:
    """What user code does by mistake: await a task it cancelled itself."""
    child = asyncio.create_task(asyncio.sleep(30))
    await asyncio.sleep(0)
    child.cancel()
    await child


async def _raise_cancelled() -> None:
    raise asyncio.CancelledError


STRAYS = {"awaited-cancelled-child": _cancel_a_child, "raised": _raise_cancelled}


class CancellingToolEnv(ToolEnv):
    """``multiply`` raises a stray CancelledError in rollout ``bad``."""

    stray: Any = staticmethod(_raise_cancelled)

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        if rollout_id == "bad":
            await self.stray()
        return await super().run_tool(rollout_id, tool_name, **tool_args)


def _tool_then_answer(server: MockModelServer) -> None:
    async def policy(body: dict[str, Any]) -> object:
        if len(body["messages"]) == 1:
            return tool_reply(("multiply", {"left": 6, "right": 7}))
        return "42"

    server.policy = policy


@pytest.mark.parametrize("stray", STRAYS.values(), ids=STRAYS.keys())
async def test_a_stray_cancellation_in_a_tool_is_tool_error_and_siblings_finish(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture, stray: Any
) -> None:
    _tool_then_answer(mock_server)
    env = CancellingToolEnv()
    env.stray = stray
    outcomes = await env.run_group(
        [make_request(mock_server, "bad"), make_request(mock_server, "good")]
    )
    assert outcomes["bad"].termination_reason == "tool_error"
    assert outcomes["bad"].rewards == {"correct": 0.0}
    assert outcomes["good"].termination_reason == "finished"
    assert outcomes["good"].rewards == {"correct": 1.0}
    assert "CancellingToolEnv.run_tool raised asyncio.CancelledError" in caplog.text
    await env.aclose()


class CancellingRewardEnv(AnswerEnv):
    async def compute_reward(self, rollout: BaseRollout) -> RewardMap | None:
        if rollout.rollout_id == "bad":
            await _cancel_a_child()
        return await super().compute_reward(rollout)


async def test_a_stray_cancellation_in_compute_reward_is_reward_error(
    mock_server: MockModelServer,
) -> None:
    mock_server.policy = scripted(["42"])
    env = CancellingRewardEnv()
    outcomes = await env.run_group(
        [make_request(mock_server, "bad"), make_request(mock_server, "good")]
    )
    assert outcomes["bad"].termination_reason == "reward_error"
    assert outcomes["good"].termination_reason == "finished"
    assert outcomes["good"].rewards == {"correct": 1.0}
    await env.aclose()


class CancellingGroupEnv(AnswerEnv):
    reward_keys = ("correct", "rank")

    async def compute_group_rewards(
        self, rollouts: Sequence[BaseRollout]
    ) -> Mapping[str, RewardMap] | None:
        raise asyncio.CancelledError


async def test_a_stray_cancellation_in_compute_group_rewards_is_group_reward_error(
    mock_server: MockModelServer,
) -> None:
    mock_server.policy = scripted(["42"])
    env = CancellingGroupEnv()
    outcomes = await env.run_group([make_request(mock_server, f"r{i}") for i in range(2)])
    assert {o.termination_reason for o in outcomes.values()} == {"group_reward_error"}
    assert all(o.rewards == {"correct": 0.0, "rank": 0.0} for o in outcomes.values())
    await env.aclose()


class CancellingAuth:
    """A judge credential hook (user code) that raises a stray CancelledError."""

    async def headers_for_request(self, context: Any) -> dict[str, str]:
        raise asyncio.CancelledError


async def test_a_stray_cancellation_in_a_judge_call_is_judge_error(
    mock_server: MockModelServer,
) -> None:
    mock_server.policy = scripted(['{"score": 1}'])
    judge = Judge("judge", mock_server.base_url, CancellingAuth(), max_retries=0)
    with pytest.raises(JudgeError, match="CancelledError"):
        await judge.request_json("grade", request_id="r-1")


class JudgedEnv(AnswerEnv):
    def __init__(self, judge: Judge) -> None:
        super().__init__()
        self.judge = judge

    async def compute_reward(self, rollout: BaseRollout) -> RewardMap | None:
        parsed, _ = await self.judge.request_json("grade", request_id=rollout.rollout_id)
        return {"correct": float(parsed["score"])}


async def test_a_judge_call_cancelled_by_its_hook_settles_the_rollout_as_judge_error(
    mock_server: MockModelServer,
) -> None:
    mock_server.policy = scripted(["42"])
    env = JudgedEnv(Judge("judge", mock_server.base_url, CancellingAuth(), max_retries=0))
    outcomes = await env.run_group([make_request(mock_server, "r0")])
    assert outcomes["r0"].termination_reason == "judge_error"
    await env.aclose()


# -- rollout_context -----------------------------------------------------------------------


class SandboxEnv(AnswerEnv):
    """``rollout_context`` fails to set up for rollout ``bad`` in the way ``failure`` says."""

    failure: str = "refused"

    def __init__(self) -> None:
        super().__init__()
        self.exited: list[str] = []

    @asynccontextmanager
    async def rollout_context(self, rollout_id: str, example: Example[Any]) -> AsyncIterator[None]:
        if rollout_id == "bad":
            if self.failure == "refused":
                raise ConnectionRefusedError("sandbox service refused the connection")
            if self.failure == "cancelled":
                await _cancel_a_child()
            if self.failure == "rollout-failure":
                raise RolloutFailure("sandbox_error", "no sandbox capacity")
        try:
            yield
        finally:
            self.exited.append(rollout_id)
            if self.failure == "exit" and rollout_id == "bad":
                raise OSError("sandbox did not stop")


@pytest.mark.parametrize("failure", ["refused", "cancelled"])
async def test_rollout_context_failing_to_set_up_is_setup_error_and_siblings_finish(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture, failure: str
) -> None:
    mock_server.policy = scripted(["42"])
    env = SandboxEnv()
    env.failure = failure
    outcomes = await env.run_group(
        [make_request(mock_server, "bad"), make_request(mock_server, "good")]
    )
    assert outcomes["bad"].termination_reason == "setup_error"
    assert outcomes["bad"].rewards == {"correct": 0.0}
    assert outcomes["good"].termination_reason == "finished"
    assert outcomes["good"].rewards == {"correct": 1.0}
    assert [r.rollout_id for r in env.reward_calls] == ["good"]  # no reward hooks for bad
    assert len(mock_server.requests) == 1  # no model call for bad
    assert env.exited == ["good"]
    (record,) = [r for r in caplog.records if "setup_failed" in r.getMessage()]
    assert record.levelno == logging.ERROR
    assert "rollout_id=bad termination_reason=setup_error" in record.getMessage()
    await env.aclose()


async def test_a_rollout_failure_while_setting_up_keeps_its_own_reason(
    mock_server: MockModelServer,
) -> None:
    mock_server.policy = scripted(["42"])
    env = SandboxEnv()
    env.failure = "rollout-failure"
    outcomes = await env.run_group(
        [make_request(mock_server, "bad"), make_request(mock_server, "good")]
    )
    assert outcomes["bad"].termination_reason == "sandbox_error"
    assert outcomes["good"].termination_reason == "finished"
    await env.aclose()


async def test_an_exception_on_exit_is_logged_never_raised_over_the_outcome(
    mock_server: MockModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    mock_server.policy = scripted(["42"])
    env = SandboxEnv()
    env.failure = "exit"
    outcomes = await env.run_group(
        [make_request(mock_server, "bad"), make_request(mock_server, "good")]
    )
    assert outcomes["bad"].termination_reason == "finished"
    assert outcomes["bad"].rewards == {"correct": 1.0}
    assert "rollout_context raised on exit: sandbox did not stop" in caplog.text
    await env.aclose()


# -- a real cancellation still propagates ----------------------------------------------------


class SlowToolEnv(ToolEnv):
    def __init__(self, **limits: Any) -> None:
        super().__init__(**limits)
        self.tool_started = asyncio.Event()

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        self.tool_started.set()
        await asyncio.Event().wait()  # never set: only a timeout or a cancellation ends it


async def test_stopping_the_run_still_cancels_a_tool(mock_server: MockModelServer) -> None:
    _tool_then_answer(mock_server)
    env = SlowToolEnv()
    task = asyncio.create_task(env.run_group([make_request(mock_server, "r0")]))
    await env.tool_started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await env.aclose()


async def test_a_tool_timeout_is_still_tool_timeout(mock_server: MockModelServer) -> None:
    _tool_then_answer(mock_server)
    env = SlowToolEnv(tool_timeout=0.05)
    rollout = await env.run_rollout(make_request(mock_server, "r0"))
    assert rollout.termination_reason == "tool_timeout"
    await env.aclose()


async def test_cancelling_a_rollout_during_setup_propagates(
    mock_server: MockModelServer,
) -> None:
    setting_up = asyncio.Event()

    class SlowSetup(AnswerEnv):
        @asynccontextmanager
        async def rollout_context(
            self, rollout_id: str, example: Example[Any]
        ) -> AsyncIterator[None]:
            setting_up.set()
            await asyncio.Event().wait()  # never set
            yield

    env = SlowSetup()
    task = asyncio.create_task(env.run_rollout(make_request(mock_server, "r0")))
    await setting_up.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await env.aclose()
