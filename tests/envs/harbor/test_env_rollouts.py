"""Rollouts through Harbor's real Trial with the sandbox and agent steps replaced."""

from __future__ import annotations

import asyncio
import copy
import os
import pickle
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from harbor.models.trial.config import AgentConfig, TaskConfig, TrialConfig, VerifierConfig
from harbor.trial.trial import Trial
from tests.envs.harbor.conftest import (
    BASE_URL,
    BEARER_TOKEN,
    agent_files,
    make_request,
    write_task,
)
from tests.envs.harbor.harbor_fakes import AGENT_IMPORT_PATH, Recorder

from benchmax.auth import ModelRequestContext
from benchmax.envs.harbor import (
    BundledAgentSource,
    BundledHarborAgent,
    CustomSandboxCredentials,
    HarborEnv,
    HarborTrialTemplate,
)
from benchmax.envs.shared_types import RolloutOutcome

pytestmark = [
    pytest.mark.usefixtures("harbor_recorder"),
    pytest.mark.filterwarnings("ignore:Task.checksum:DeprecationWarning"),
]


@pytest.fixture
def created_configs(monkeypatch: pytest.MonkeyPatch) -> list[TrialConfig]:
    """Record every TrialConfig handed to Harbor's real ``Trial.create``."""
    configs: list[TrialConfig] = []
    original = Trial.create.__func__  # type: ignore[attr-defined]

    async def create(cls: type[Trial], config: TrialConfig) -> Trial:
        configs.append(config)
        return await original(cls, config)

    monkeypatch.setattr(Trial, "create", classmethod(create))
    return configs


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch, harbor_recorder: Recorder) -> Any:
    monkeypatch.delenv("SANDBOX_TOKEN", raising=False)
    harbor_recorder.watched_variables = ("SANDBOX_TOKEN",)
    return CustomSandboxCredentials({"SANDBOX_TOKEN": "sandbox-secret"})


async def test_group_runs_concurrently_with_credentials_exposed(
    make_env: Callable[..., HarborEnv],
    make_template: Callable[..., HarborTrialTemplate],
    task_payload: TaskConfig,
    credentials: Any,
    harbor_recorder: Recorder,
) -> None:
    env = make_env(
        trial=make_template(agent_kwargs={"delay": 0.5}), sandbox_credentials=credentials
    )
    requests = [make_request(f"rollout-{index}", task_payload) for index in range(3)]
    outcomes = await env.run_group(requests)
    assert outcomes == {
        f"rollout-{index}": RolloutOutcome(rewards={"reward": 1.0}, termination_reason="finished")
        for index in range(3)
    }
    assert harbor_recorder.sandbox_environ == [{"SANDBOX_TOKEN": "sandbox-secret"}] * 3
    assert harbor_recorder.peak == 3
    assert "SANDBOX_TOKEN" not in os.environ


class CountingCredentials:
    """Provider-free credentials that count how often a scope reads them."""

    provider = None

    def __init__(self) -> None:
        self.reads = 0

    def host_environment(self) -> Mapping[str, str]:
        self.reads += 1
        return {"SANDBOX_TOKEN": "sandbox-secret"}


async def test_group_enters_the_scope_once_and_rollouts_reuse_it(
    make_env: Callable[..., HarborEnv],
    task_payload: TaskConfig,
    credentials: Any,
    harbor_recorder: Recorder,
) -> None:
    counting = CountingCredentials()
    env = make_env(sandbox_credentials=counting)
    await env.run_group([make_request(f"r{index}", task_payload) for index in range(3)])
    assert counting.reads == 1  # the rollouts' own scope entries were no-ops
    assert harbor_recorder.sandbox_environ == [{"SANDBOX_TOKEN": "sandbox-secret"}] * 3
    await env.run_rollout(make_request("direct", task_payload))
    assert counting.reads == 2
    assert "SANDBOX_TOKEN" not in os.environ


async def test_direct_rollout_enters_the_credential_scope_itself(
    make_env: Callable[..., HarborEnv],
    task_payload: TaskConfig,
    credentials: Any,
    harbor_recorder: Recorder,
) -> None:
    env = make_env(sandbox_credentials=credentials)
    attempt = await env.run_rollout(make_request("direct", task_payload))
    assert attempt.termination_reason == "finished"
    assert harbor_recorder.sandbox_environ == [{"SANDBOX_TOKEN": "sandbox-secret"}]
    assert "SANDBOX_TOKEN" not in os.environ


async def test_trial_config_carries_the_per_rollout_settings(
    make_env: Callable[..., HarborEnv],
    make_template: Callable[..., HarborTrialTemplate],
    task_payload: TaskConfig,
    created_configs: list[TrialConfig],
    harbor_recorder: Recorder,
    tmp_path: Path,
) -> None:
    judge_env = {"OPENAI_BASE_URL": "https://judge.example/v1", "OPENAI_API_KEY": "judge-key"}
    template = make_template(
        verifier=VerifierConfig(env=judge_env),
        timeout_multiplier=2.0,
        agent_timeout_multiplier=3.0,
        artifacts=["/logs/extra.txt"],
        extra_instruction_paths=[tmp_path / "extra.md"],
    )
    (tmp_path / "extra.md").write_text("Extra guidance.\n")
    env = make_env(trial=template)
    await env.run_group([make_request("alpha", task_payload), make_request("beta", task_payload)])

    by_name = {config.trial_name: config for config in created_configs}
    assert set(by_name) == {"alpha", "beta"}
    for rollout_id, config in by_name.items():
        assert isinstance(config, TrialConfig)
        assert config.trials_dir == template.trials_dir
        assert config.timeout_multiplier == 2.0 and config.agent_timeout_multiplier == 3.0
        assert config.verifier_timeout_multiplier is None
        assert config.task == task_payload and config.task is not task_payload
        assert config.agent.model_name == "openai/trainer-model"
        assert config.agent.env == {
            "AGENT_SETTING": "kept",
            "OPENAI_API_KEY": BEARER_TOKEN,
            "OPENAI_BASE_URL": BASE_URL,
            "OPENAI_API_BASE": BASE_URL,
        }
        assert config.verifier.env == judge_env
        assert config.environment == template.environment
        assert config.environment is not template.environment
        assert config.artifacts == ["/logs/extra.txt"]
        assert config.extra_instruction_paths == [tmp_path / "extra.md"]
        assert config.install_only is False and config.job_id is None
        assert (template.trials_dir / rollout_id / "result.json").is_file()
    assert template.agent.env == {"AGENT_SETTING": "kept"}
    assert template.agent.model_name is None
    assert template.verifier.env == judge_env

    # What Harbor handed the agent inside the trial.
    sessions = sorted(agent["session_id"] for agent in harbor_recorder.agents)
    assert sessions == ["alpha__agent", "beta__agent"]
    for agent in harbor_recorder.agents:
        assert agent["env"]["OPENAI_API_KEY"] == BEARER_TOKEN
        assert agent["env"]["OPENAI_API_BASE"] == BASE_URL
        assert "Extra guidance." in agent["instruction"]


class PerRolloutAuth:
    """Issues a different bearer token for every rollout."""

    def __init__(self) -> None:
        self.contexts: list[ModelRequestContext] = []

    async def headers_for_request(self, context: ModelRequestContext) -> Mapping[str, str]:
        self.contexts.append(context)
        return {"Authorization": f"Bearer token-for-{context.rollout_id}"}


@pytest.mark.parametrize(
    ("model", "routed"),
    [
        ("trainer-model", "openai/trainer-model"),
        ("Qwen/Qwen3.5-4B", "openai/Qwen/Qwen3.5-4B"),
        ("openai/already-routed", "openai/already-routed"),
    ],
)
async def test_model_routing_and_per_rollout_tokens(
    make_env: Callable[..., HarborEnv],
    task_payload: TaskConfig,
    harbor_recorder: Recorder,
    model: str,
    routed: str,
) -> None:
    auth = PerRolloutAuth()
    env = make_env()
    requests = [make_request(name, task_payload, model=model, auth=auth) for name in ("a", "b")]
    await env.run_group(requests)
    assert sorted(c.rollout_id for c in auth.contexts) == ["a", "b"]
    assert {c.model for c in auth.contexts} == {model}
    assert {c.base_url for c in auth.contexts} == {BASE_URL}
    tokens = {
        agent["session_id"]: agent["env"]["OPENAI_API_KEY"] for agent in harbor_recorder.agents
    }
    assert tokens == {"a__agent": "token-for-a", "b__agent": "token-for-b"}
    assert {agent["model_name"] for agent in harbor_recorder.agents} == {routed}


async def test_max_concurrent_trials_caps_across_groups(
    make_env: Callable[..., HarborEnv],
    make_template: Callable[..., HarborTrialTemplate],
    tmp_path: Path,
    harbor_recorder: Recorder,
) -> None:
    env = make_env(trial=make_template(agent_kwargs={"delay": 0.5}), max_concurrent_trials=2)
    first = TaskConfig(path=write_task(tmp_path / "first", instruction="one"))
    second = TaskConfig(path=write_task(tmp_path / "second", instruction="two"))
    group_one = [make_request(f"g1-{i}", first, example_id="first") for i in range(2)]
    group_two = [make_request("g2-0", second, example_id="second")]
    results = await asyncio.gather(env.run_group(group_one), env.run_group(group_two))
    assert [len(result) for result in results] == [2, 1]
    assert harbor_recorder.peak == 2
    assert len(harbor_recorder.agents) == 3


def test_trial_cap_works_from_successive_event_loops(
    make_env: Callable[..., HarborEnv], task_payload: TaskConfig
) -> None:
    env = make_env(max_concurrent_trials=1)
    for loop_name in ("loop-one", "loop-two"):
        # Two rollouts contend for the single slot on each loop.
        requests = [make_request(f"{loop_name}-{index}", task_payload) for index in range(2)]
        outcomes = asyncio.run(env.run_group(requests))
        assert {outcome.termination_reason for outcome in outcomes.values()} == {"finished"}


@pytest.mark.parametrize(
    "rollout_id", ["../escape", ".hidden", "-dash", "a/b", "a b", "ü", "ok\n", "ok/"]
)
async def test_unsafe_rollout_ids_are_rejected_before_any_trial(
    make_env: Callable[..., HarborEnv],
    task_payload: TaskConfig,
    created_configs: list[TrialConfig],
    rollout_id: str,
) -> None:
    with pytest.raises(ValueError) as caught:
        await make_env().run_group([make_request(rollout_id, task_payload)])
    assert str(caught.value) == (
        "Harbor rollout_id must contain only letters, numbers, '.', '_', and '-', "
        "and must start with a letter or number"
    )
    assert created_configs == []


async def test_contract_errors_surface_after_siblings_finish(
    make_env: Callable[..., HarborEnv],
    make_template: Callable[..., HarborTrialTemplate],
    task_payload: TaskConfig,
    harbor_recorder: Recorder,
) -> None:
    env = make_env(trial=make_template(agent_kwargs={"delay": 0.1}))
    good = make_request("good", task_payload)
    bad = make_request("bad", {"path": "not-a-task-config"})
    with pytest.raises(TypeError) as caught:
        await env.run_group([good, bad])
    assert str(caught.value) == "HarborEnv rollout payload must be Harbor TaskConfig, got dict"
    assert [agent["session_id"] for agent in harbor_recorder.agents] == ["good__agent"]


async def test_bundled_agent_preparation_errors_propagate_and_credentials_are_restored(
    make_env: Callable[..., HarborEnv],
    make_template: Callable[..., HarborTrialTemplate],
    task_payload: TaskConfig,
    created_configs: list[TrialConfig],
    credentials: Any,
) -> None:
    agent = BundledHarborAgent(
        AgentConfig(import_path="agent:Missing"),
        BundledAgentSource.from_files(agent_files("missing-class")),
    )
    env = make_env(trial=make_template(agent=agent), sandbox_credentials=credentials)
    requests = [make_request(f"r{index}", task_payload) for index in range(2)]
    with pytest.raises(ValueError) as caught:
        await env.run_group(requests)
    assert str(caught.value) == "bundled agent module 'agent' has no class 'Missing'"
    assert created_configs == []
    assert "SANDBOX_TOKEN" not in os.environ


class NonBearerAuth:
    def __init__(self, headers: Mapping[str, str]) -> None:
        self._headers = headers

    async def headers_for_request(self, context: ModelRequestContext) -> Mapping[str, str]:
        return self._headers


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Basic dXNlcjpwYXNz"}, {"Authorization": "bearer lower"}]
)
async def test_non_bearer_auth_is_rejected(
    make_env: Callable[..., HarborEnv],
    task_payload: TaskConfig,
    created_configs: list[TrialConfig],
    headers: Mapping[str, str],
) -> None:
    request = make_request("r1", task_payload, auth=NonBearerAuth(headers))
    with pytest.raises(ValueError) as caught:
        await make_env().run_group([request])
    assert str(caught.value) == "Harbor model auth must provide a Bearer token"
    assert "dXNlcjpwYXNz" not in str(caught.value)
    assert created_configs == []


async def test_real_trial_failure_settles_as_harness_error(
    make_env: Callable[..., HarborEnv],
    make_template: Callable[..., HarborTrialTemplate],
    task_payload: TaskConfig,
) -> None:
    agent = AgentConfig(import_path=AGENT_IMPORT_PATH, kwargs={"fail_with": "agent crashed"})
    env = make_env(trial=make_template(agent=agent), reward_keys=("reward", "partial_credit"))
    outcomes = await env.run_group([make_request("crash", task_payload)])
    assert outcomes["crash"] == RolloutOutcome(
        rewards={"reward": 0.0, "partial_credit": 0.0}, termination_reason="harness_error"
    )


def test_env_copies_keep_working_on_new_loops(
    make_env: Callable[..., HarborEnv], task_payload: TaskConfig
) -> None:
    env = make_env(max_concurrent_trials=1)
    asyncio.run(env.run_group([make_request("before-copy", task_payload)]))
    for copied in (copy.deepcopy(env), pickle.loads(pickle.dumps(env))):
        outcomes = asyncio.run(copied.run_group([make_request("after-copy", task_payload)]))
        assert outcomes["after-copy"].termination_reason == "finished"


async def test_rollout_checks_run_in_the_documented_order(
    make_env: Callable[..., HarborEnv],
    make_template: Callable[..., HarborTrialTemplate],
    task_payload: TaskConfig,
    created_configs: list[TrialConfig],
) -> None:
    """Payload type, then rollout id, then bundled-agent preparation, then model auth."""
    missing_class = BundledHarborAgent(
        AgentConfig(import_path="agent:Missing"),
        BundledAgentSource.from_files(agent_files("order")),
    )
    broken_env = make_env(trial=make_template(agent=missing_class))
    auth = NonBearerAuth({"Authorization": "Basic abc"})
    steps: list[tuple[HarborEnv, Any, str, type[Exception], str]] = [
        (broken_env, {"path": "x"}, "../x", TypeError, "must be Harbor TaskConfig"),
        (broken_env, task_payload, "../x", ValueError, "Harbor rollout_id must contain"),
        (broken_env, task_payload, "ok", ValueError, "has no class 'Missing'"),
        (make_env(), task_payload, "ok", ValueError, "must provide a Bearer token"),
    ]
    for env, payload, rollout_id, error, message in steps:
        with pytest.raises(error, match=message):
            await env.run_rollout(make_request(rollout_id, payload, auth=auth))
    assert created_configs == []
