"""Harbor trials with ``capture_calls``: a scripted agent's model calls are captured into
the rollout's trajectory with token ids, and the agent never sees the upstream key."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai
import pytest
from harbor.agents.base import BaseAgent
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext
from harbor.models.trial.config import AgentConfig, TaskConfig
from tests.capture.support import versioned_upstream
from tests.envs.harbor.conftest import write_task

from benchmax.envs import Example, RolloutRequest, StaticBearerAuth
from benchmax.envs.harbor import HarborEnv, HarborTrialTemplate
from benchmax.testing import MockModelServer, echo
from benchmax.training import collect_group

UPSTREAM_KEY = "sk-harbor-upstream-secret-0123456789"
SEEN: list[dict[str, str]] = []

pytestmark = [
    pytest.mark.usefixtures("harbor_recorder"),
    pytest.mark.filterwarnings("ignore:Task.checksum:DeprecationWarning"),
]


class CallingAgent(BaseAgent):
    """A scripted harness: two chat calls through OPENAI_BASE_URL, as a real agent makes."""

    @staticmethod
    def name() -> str:
        return "calling-agent"

    def version(self) -> str | None:
        return "1"

    async def setup(self, environment: BaseEnvironment) -> None:
        return None

    async def run(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        env = dict(self.extra_env)
        SEEN.append(env)
        async with openai.AsyncOpenAI(
            base_url=env["OPENAI_BASE_URL"], api_key=env["OPENAI_API_KEY"], max_retries=0
        ) as client:  # closed on this loop, not on a later test's
            messages: list[Any] = [{"role": "user", "content": instruction}]
            for _ in range(2):
                reply = await client.chat.completions.create(
                    model="trainer-model", messages=messages
                )
                messages += [reply.choices[0].message.model_dump(exclude_none=True)]
                messages += [{"role": "user", "content": "again"}]


async def test_harbor_agent_calls_become_the_trajectory(
    tmp_path: Any,
    make_template: Callable[..., HarborTrialTemplate],
    make_env: Callable[..., HarborEnv],
) -> None:
    agent = AgentConfig(import_path=f"{__name__}:CallingAgent")
    env = make_env(trial=make_template(agent=agent), capture_calls=True)
    task = TaskConfig(path=write_task(tmp_path / "task", rewards={"reward": 1.0}))
    async with MockModelServer(echo, tokens=True) as upstream:
        request: RolloutRequest[Any] = RolloutRequest(
            rollout_id="h1",
            example=Example(id="task", payload=task),
            model="trainer-model",
            base_url=upstream.base_url,
            model_auth=StaticBearerAuth(UPSTREAM_KEY),
        )
        group = await collect_group(env, [request])
    (trajectory,) = group.trajectories
    assert trajectory.termination_reason == "finished"
    assert len(trajectory.model_calls) == 2
    assert all(call.has_tokens for call in trajectory.model_calls)
    assert [b.began for b in trajectory.branches] == ["first"]  # the second call continues
    assert trajectory.coverage is not None and trajectory.coverage.share == 1.0
    assert UPSTREAM_KEY not in str(SEEN[-1])
    assert SEEN[-1]["OPENAI_BASE_URL"].endswith("/rollouts/h1/v1")
    assert all(r.headers["authorization"] == f"Bearer {UPSTREAM_KEY}" for r in upstream.requests)


async def test_harbor_calls_carry_the_weights_version_that_sampled_them(
    tmp_path: Any,
    make_template: Callable[..., HarborTrialTemplate],
    make_env: Callable[..., HarborEnv],
) -> None:
    agent = AgentConfig(import_path=f"{__name__}:CallingAgent")
    env = make_env(trial=make_template(agent=agent), capture_calls=True)
    task = TaskConfig(path=write_task(tmp_path / "task", rewards={"reward": 1.0}))
    async with versioned_upstream(echo) as base_url:
        request: RolloutRequest[Any] = RolloutRequest(
            rollout_id="h2",
            example=Example(id="task", payload=task),
            model="trainer-model",
            base_url=base_url,
            model_auth=StaticBearerAuth(UPSTREAM_KEY),
        )
        group = await collect_group(env, [request])
    (trajectory,) = group.trajectories
    assert trajectory.termination_reason == "finished"
    assert [call.weights_version for call in trajectory.model_calls] == [0, 1]
    calls = trajectory.to_json()["model_calls"]
    assert [call.get("weights_version") for call in calls] == [0, 1]


def test_capture_calls_must_be_a_bool(make_env: Callable[..., HarborEnv]) -> None:
    with pytest.raises(TypeError, match="capture_calls must be True or False"):
        make_env(capture_calls="yes")
