"""A hook that never returns is found: it settles its rollout, naming hook, line and rollout.

Each hook below awaits an ``asyncio.Event`` that is never set, under a small deadline for
its own kind only (every other kind has none), so nothing here depends on how fast the
machine is: the stuck hook can only end by its deadline, and nothing else can expire.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from tests.runner.sample_envs import AnswerEnv, write_answer_data

from benchmax._hook_deadlines import DEFAULT_HOOK_SECONDS, deadline_for
from benchmax.auth import StaticBearerAuth
from benchmax.envs import BaseRollout, Example, JsonRow, RewardMap, RolloutRequest
from benchmax.results import read_results
from benchmax.rewards import Judge
from benchmax.runner import HookDeadlines, RunConfig, run_environment
from benchmax.testing import MockModelServer, ToolExerciser
from benchmax.tools import tool
from benchmax.training import collect_group
from benchmax.validation import ValidationConfig, validate_environment

SMALL = 0.05


async def stall() -> None:
    await asyncio.Event().wait()


STALL_LINE = stall.__code__.co_firstlineno + 1
STALLED_AT = f"stall ({Path(__file__)}:{STALL_LINE})"


class StuckReward(AnswerEnv):
    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        await stall()
        return {"correct": 1.0}


class StuckRunTool(AnswerEnv):
    max_turns = 2

    async def list_tools(self) -> list[Any]:
        return [{"type": "function", "function": {"name": "wait", "parameters": {}}}]

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        await stall()


@tool
async def wait_forever() -> str:
    """Never answers."""
    await stall()
    return "never"


class StuckDeclaredTool(AnswerEnv):
    max_turns = 2
    tools = (wait_forever,)


class StuckListing(AnswerEnv):
    async def list_tools(self) -> list[Any]:
        await stall()
        return []


class StuckEntry(AnswerEnv):
    @asynccontextmanager
    async def rollout_context(
        self, rollout_id: str, example: Example[JsonRow]
    ) -> AsyncIterator[None]:
        await stall()
        yield


class StuckExit(AnswerEnv):
    @asynccontextmanager
    async def rollout_context(
        self, rollout_id: str, example: Example[JsonRow]
    ) -> AsyncIterator[None]:
        yield
        await stall()


class StuckUser(AnswerEnv):
    async def user_turn(
        self, rollout_id: str, messages: Sequence[Mapping[str, Any]], example: Example[JsonRow]
    ) -> str | None:
        await stall()
        return None


class StuckGroupHook(AnswerEnv):
    async def compute_group_rewards(
        self, rollouts: Sequence[BaseRollout]
    ) -> Mapping[str, RewardMap] | None:
        await stall()
        return None


def requests(server: MockModelServer, count: int = 2) -> list[RolloutRequest[Any]]:
    payload = {"prompt_messages": [{"role": "user", "content": "q0"}], "answer": "q0"}
    example = Example(id="ex", payload=payload)
    return [
        RolloutRequest(
            rollout_id=f"stuck.r{k}",
            example=example,
            model="m",
            base_url=server.session_url(f"stuck.r{k}"),
            model_auth=StaticBearerAuth("sk-deadline-test"),
        )
        for k in range(count)
    ]


def deadlines(kind: str) -> HookDeadlines:
    return HookDeadlines(**{**{k: None for k in _KINDS}, kind: SMALL})


_KINDS = (
    "rollout_context",
    "tools",
    "user_turn",
    "compute_reward",
    "compute_group_rewards",
    "judge",
)


async def collected_with(env: AnswerEnv, server: MockModelServer, kind: str) -> Any:
    try:
        return await collect_group(env, requests(server), hook_deadlines=deadlines(kind))
    finally:
        await env.aclose()


def messages(trajectory: Any) -> list[str]:
    return [log["message"] for log in trajectory.logs]


@pytest.mark.parametrize(
    ("env_class", "kind", "reason", "hook"),
    [
        (StuckReward, "compute_reward", "reward_timeout", "compute_reward"),
        (StuckRunTool, "tools", "tool_timeout", "tool 'wait'"),
        (StuckDeclaredTool, "tools", "tool_timeout", "tool 'wait_forever'"),
        (StuckListing, "tools", "tool_timeout", "list_tools"),
        (StuckEntry, "rollout_context", "setup_error", "rollout_context (entering)"),
        (StuckUser, "user_turn", "simulated_user_error", "user_turn"),
    ],
)
async def test_a_stuck_hook_settles_its_rollout_and_is_named(
    mock_server: MockModelServer,
    env_class: type[AnswerEnv],
    kind: str,
    reason: str,
    hook: str,
) -> None:
    mock_server.policy = ToolExerciser()  # calls the advertised tool, if any
    collected = await collected_with(env_class(), mock_server, kind)
    for trajectory in collected.trajectories:
        assert trajectory.termination_reason == reason
        assert trajectory.rewards == {"correct": 0.0}
        (said,) = [m for m in messages(trajectory) if "default deadline" in m]
        assert f"rollout_id={trajectory.rollout_id}" in said
        assert f"{hook} did not return within the runner's default deadline of {SMALL:g}s" in said
        assert STALLED_AT in said


async def test_a_stuck_exit_is_logged_and_the_outcome_kept(
    mock_server: MockModelServer,
) -> None:
    collected = await collected_with(StuckExit(), mock_server, "rollout_context")
    for trajectory in collected.trajectories:
        assert (trajectory.termination_reason, trajectory.rewards) == ("finished", {"correct": 1.0})
        (said,) = messages(trajectory)
        assert said.startswith(f"base.rollout.teardown_failed rollout_id={trajectory.rollout_id}")
        assert "rollout_context (leaving) did not return" in said and STALLED_AT in said


async def test_a_stuck_group_hook_settles_the_group(
    mock_server: MockModelServer,
) -> None:
    collected = await collected_with(StuckGroupHook(), mock_server, "compute_group_rewards")
    assert [t.termination_reason for t in collected.trajectories] == ["group_reward_error"] * 2
    said = messages(collected.trajectories[0])[0]
    assert "compute_group_rewards (rollouts stuck.r0, stuck.r1) did not return" in said
    assert STALLED_AT in said


class JudgedEnv(AnswerEnv):
    def __init__(self, judge: Judge) -> None:
        super().__init__()
        self.judge = judge

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        await self.judge.request_json("grade it", request_id=rollout.rollout_id)
        return {"correct": 1.0}


@asynccontextmanager
async def silent_server() -> AsyncIterator[str]:
    """A server on 127.0.0.1 that accepts connections and never answers."""
    connections: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        await asyncio.Event().wait()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        for writer in connections:
            writer.close()
        server.close()


async def test_a_judge_without_a_timeout_gets_the_default_deadline(
    mock_server: MockModelServer,
) -> None:
    async with silent_server() as url:
        judge = Judge(model="j", base_url=url, auth=StaticBearerAuth("sk-judge"), timeout=None)
        collected = await collected_with(JudgedEnv(judge), mock_server, "judge")
    for trajectory in collected.trajectories:
        assert trajectory.termination_reason == "judge_error"
        said = next(m for m in messages(trajectory) if "default deadline" in m)
        assert f"rollout_id={trajectory.rollout_id}" in said
        assert (
            f"judge request did not answer within the runner's default deadline of {SMALL:g}s"
            in said
        )
        assert f"called from JudgedEnv.compute_reward ({Path(__file__)}:" in said


async def test_the_environments_own_limit_wins(
    mock_server: MockModelServer,
) -> None:
    env = StuckReward(reward_timeout=SMALL)
    collected = await collected_with(env, mock_server, "tools")  # no reward default
    said = messages(collected.trajectories[0])
    assert any(f"compute_reward exceeded reward_timeout of {SMALL:g}s" in m for m in said)


def test_defaults_and_validation() -> None:
    assert deadline_for("compute_reward").seconds is None  # nothing bound: the 0.2 behavior
    assert HookDeadlines().compute_reward == DEFAULT_HOOK_SECONDS == 900.0
    assert HookDeadlines.none() == HookDeadlines.uniform(None)
    with pytest.raises(ValueError, match="hook deadline tools must be a positive number or None"):
        HookDeadlines(tools=0)
    with pytest.raises(TypeError, match="hook_deadlines must be a HookDeadlines"):
        RunConfig(model="m", base_url="http://x.invalid/v1", hook_deadlines=5)  # type: ignore[arg-type]


async def test_run_settles_a_stuck_reward_and_keeps_going(
    mock_server: MockModelServer, tmp_path: Path
) -> None:
    write_answer_data(tmp_path, count=2)
    config = RunConfig(
        model="m",
        base_url=mock_server.base_url,
        base_dir=tmp_path,
        group_size=2,
        output=tmp_path / "run.jsonl",
        hook_deadlines=deadlines("compute_reward"),
    )
    env = StuckReward()
    report = await run_environment(env, config)
    await env.aclose()
    assert report.rollouts_run == 4
    for record in read_results(tmp_path / "run.jsonl").rollouts:
        assert record.termination_reason == "reward_timeout"
        (said,) = [log["message"] for log in record.logs if "default deadline" in log["message"]]
        assert f"rollout_id={record.rollout_id}" in said and STALLED_AT in said


async def test_validate_names_the_stuck_hook(tmp_path: Path) -> None:
    write_answer_data(tmp_path, count=2)
    config = ValidationConfig(
        base_dir=tmp_path, fresh_interpreter=False, hook_deadlines=deadlines("compute_reward")
    )
    report = await validate_environment(StuckReward, config)
    (rollouts,) = [check for check in report.checks if check.name == "rollouts"]
    assert rollouts.status == "failed"
    assert "every rollout failed" in rollouts.detail and "4 reward_timeout" in rollouts.detail
    assert "compute_reward did not return within the runner's default deadline" in rollouts.detail
    json.dumps(rollouts.detail)  # plain text
