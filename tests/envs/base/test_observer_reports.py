"""BaseEnv's reports to a bound rollout observer (beyond.md §5 side channel)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from tests.envs.base.support import ToolEnv, make_request, tool_reply

from benchmax._observer import RolloutReport, observe_rollouts
from benchmax.envs.base.env import BaseRollout
from benchmax.envs.shared_types import RewardMap
from benchmax.testing import Fault, MockModelServer, scripted


class Recorder:
    def __init__(self) -> None:
        self.reports: list[RolloutReport] = []

    def rollout_finished(self, report: RolloutReport) -> None:
        self.reports.append(report)


class TimedEnv(ToolEnv):
    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        await asyncio.sleep(0.05)
        return await super().run_tool(rollout_id, tool_name, **tool_args)

    async def compute_reward(self, rollout: BaseRollout) -> RewardMap | None:
        await asyncio.sleep(0.03)
        return await super().compute_reward(rollout)


async def test_each_rollout_reports_transcript_and_timings(mock_server: MockModelServer) -> None:
    async def slow_model(body: dict[str, Any]) -> Any:
        await asyncio.sleep(0.02)
        if len(body["messages"]) == 1:
            return tool_reply(("multiply", {"left": 6, "right": 7}))
        return "42"

    mock_server.policy = slow_model
    mock_server.inject(Fault.status(500), session="rollout-1")
    recorder = Recorder()
    env = TimedEnv()
    with observe_rollouts(recorder):
        outcomes = await env.run_group(
            [make_request(mock_server, "rollout-0"), make_request(mock_server, "rollout-1")]
        )
    assert outcomes["rollout-0"].termination_reason == "finished"
    by_id = {r.rollout_id: r for r in recorder.reports}
    assert set(by_id) == {"rollout-0", "rollout-1"}

    finished = by_id["rollout-0"]
    assert finished.termination_reason == "finished"
    assert finished.messages is not None
    assert [m["role"] for m in finished.messages] == ["user", "assistant", "tool", "assistant"]
    assert finished.messages is not None
    timings = finished.timings
    assert timings["model_seconds"] >= 0.04
    assert timings["tool_seconds"] >= 0.05  # lower bounds only: a busy machine is slower
    assert timings["reward_seconds"] >= 0.03
    assert [call.message_index for call in finished.model_calls] == [1, 3]
    assert [(t.name, t.message_index) for t in finished.tool_calls] == [("multiply", 2)]
    assert finished.tool_calls[0].seconds == pytest.approx(timings["tool_seconds"], abs=2e-6)

    failed = by_id["rollout-1"]
    assert failed.termination_reason == "model_error"
    assert failed.timings["tool_seconds"] == 0.0 and failed.timings["reward_seconds"] == 0.0
    assert failed.messages is not None
    assert [m["role"] for m in failed.messages] == ["user"]
    (call,) = failed.model_calls
    assert call.message_index is None and call.finish_reason is None
    await env.aclose()


async def test_nothing_is_reported_without_an_observer(mock_server: MockModelServer) -> None:
    mock_server.policy = scripted(["42"])
    recorder = Recorder()
    env = ToolEnv()
    await env.run_rollout(make_request(mock_server, "before"))
    with observe_rollouts(recorder):
        pass
    await env.run_rollout(make_request(mock_server, "after"))
    assert recorder.reports == []
    await env.aclose()
