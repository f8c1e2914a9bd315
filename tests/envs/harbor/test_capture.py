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
from tests.capture.support import non_loopback_address, versioned_upstream
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


class RecordingAgent(CallingAgent):
    """Records what it was given and calls nothing (its URL names a host not reachable here)."""

    async def run(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        SEEN.append(dict(self.extra_env))


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


@pytest.mark.skipif(non_loopback_address() is None, reason="no non-loopback address here")
async def test_a_sandbox_off_the_hosts_loopback_reaches_the_capture_endpoint(
    tmp_path: Any,
    make_template: Callable[..., HarborTrialTemplate],
    make_env: Callable[..., HarborEnv],
) -> None:
    """Bound to every interface and advertised by this machine's network address, as a
    Docker sandbox reaches its host: the agent's calls arrive there and are captured."""
    here = non_loopback_address()
    agent = AgentConfig(import_path=f"{__name__}:CallingAgent")
    env = make_env(
        trial=make_template(agent=agent),
        capture_calls=True,
        capture_bind="0.0.0.0",
        capture_host=here,
    )
    task = TaskConfig(path=write_task(tmp_path / "task", rewards={"reward": 1.0}))
    async with MockModelServer(echo, tokens=True) as upstream:
        request: RolloutRequest[Any] = RolloutRequest(
            rollout_id="h3",
            example=Example(id="task", payload=task),
            model="trainer-model",
            base_url=upstream.base_url,
            model_auth=StaticBearerAuth(UPSTREAM_KEY),
        )
        group = await collect_group(env, [request])
    (trajectory,) = group.trajectories
    assert trajectory.termination_reason == "finished"
    assert len(trajectory.model_calls) == 2 and all(c.has_tokens for c in trajectory.model_calls)
    given = SEEN[-1]["OPENAI_BASE_URL"]
    assert given.startswith(f"http://{here}:") and given.endswith("/rollouts/h3/v1")
    assert UPSTREAM_KEY not in str(SEEN[-1])


async def test_the_agent_is_given_the_advertised_host(
    tmp_path: Any,
    make_template: Callable[..., HarborTrialTemplate],
    make_env: Callable[..., HarborEnv],
) -> None:
    agent = AgentConfig(import_path=f"{__name__}:RecordingAgent")
    task = TaskConfig(path=write_task(tmp_path / "task", rewards={"reward": 1.0}))
    async with MockModelServer(echo, tokens=True) as upstream:
        for settings, host in [
            ({"capture_bind": "0.0.0.0", "capture_host": "host.docker.internal"}, None),
            ({}, "127.0.0.1"),  # the default stays loopback
        ]:
            env = make_env(trial=make_template(agent=agent), capture_calls=True, **settings)
            request: RolloutRequest[Any] = RolloutRequest(
                rollout_id="h4",
                example=Example(id="task", payload=task),
                model="trainer-model",
                base_url=upstream.base_url,
                model_auth=StaticBearerAuth(UPSTREAM_KEY),
            )
            await collect_group(env, [request])
            expected = host or settings["capture_host"]
            assert SEEN[-1]["OPENAI_BASE_URL"].startswith(f"http://{expected}:")
            assert SEEN[-1]["OPENAI_API_BASE"] == SEEN[-1]["OPENAI_BASE_URL"]


@pytest.mark.parametrize(
    ("settings", "error", "message"),
    [
        ({"capture_bind": "0.0.0.0", "capture_host": "h"}, ValueError, "only with capture_calls"),
        ({"capture_host": "host.docker.internal"}, ValueError, "only with capture_calls=True"),
        ({"capture_calls": True, "capture_bind": "0.0.0.0"}, ValueError, "set capture_host"),
        ({"capture_calls": True, "capture_bind": "docker0"}, ValueError, "capture_bind must be"),
        (
            {"capture_calls": True, "capture_bind": "0.0.0.0", "capture_host": "http://h:1"},
            ValueError,
            "capture_host must be a host name",
        ),
    ],
)
def test_bad_capture_addresses_fail_at_construction(
    make_env: Callable[..., HarborEnv],
    settings: dict[str, Any],
    error: type[Exception],
    message: str,
) -> None:
    with pytest.raises(error, match=message):
        make_env(**settings)


def test_capture_calls_must_be_a_bool(make_env: Callable[..., HarborEnv]) -> None:
    with pytest.raises(TypeError, match="capture_calls must be True or False"):
        make_env(capture_calls="yes")
