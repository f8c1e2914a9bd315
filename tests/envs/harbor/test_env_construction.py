"""HarborEnv construction: validation order, messages, Modal defaults and retained state."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from harbor.agents.factory import AgentFactory
from harbor.models.environment_type import EnvironmentType
from harbor.models.job.config import DatasetConfig
from harbor.models.trial.config import AgentConfig, EnvironmentConfig, VerifierConfig
from tests.envs.harbor.harbor_fakes import AGENT_IMPORT_PATH, RecordingAgent

from benchmax.envs.harbor import (
    BundledAgentSource,
    BundledHarborAgent,
    CustomSandboxCredentials,
    DaytonaCredentials,
    HarborEnv,
    HarborTrialTemplate,
    ModalCredentials,
)

MODAL = ModalCredentials("modal-id-secret", "modal-token-secret")


def _modal_template(make_template: Callable[..., HarborTrialTemplate], **kwargs: Any) -> Any:
    return make_template(environment=EnvironmentConfig(type=EnvironmentType.MODAL, kwargs=kwargs))


def test_constructor_performs_no_io(make_env: Callable[..., HarborEnv], tmp_path: Path) -> None:
    env = make_env(dataset=DatasetConfig(path=tmp_path / "does-not-exist"))
    assert env.reward_keys == ("reward",)
    assert not (tmp_path / "does-not-exist").exists()
    assert not (tmp_path / "trials").exists()


def test_modal_requires_explicit_credentials(
    make_env: Callable[..., HarborEnv], make_template: Callable[..., HarborTrialTemplate]
) -> None:
    with pytest.raises(ValueError) as caught:
        make_env(trial=_modal_template(make_template))
    assert (
        str(caught.value)
        == "configured Harbor sandbox 'modal' requires explicit sandbox_credentials"
    )
    assert "explicit sandbox_credentials" in str(caught.value)
    daytona = make_template(environment=EnvironmentConfig(type=EnvironmentType.DAYTONA))
    with pytest.raises(ValueError, match="'daytona' requires explicit sandbox_credentials"):
        make_env(trial=daytona)


@pytest.mark.parametrize("setting", [{"n_concurrent": 2}, {"concurrency_group": "pool"}])
def test_job_queue_settings_are_rejected(
    make_env: Callable[..., HarborEnv],
    make_template: Callable[..., HarborTrialTemplate],
    setting: dict[str, Any],
) -> None:
    agent = AgentConfig(import_path=AGENT_IMPORT_PATH, **setting)
    with pytest.raises(ValueError) as caught:
        make_env(trial=make_template(agent=agent))
    assert str(caught.value) == (
        "agent.n_concurrent and agent.concurrency_group belong to Harbor's job queue; "
        "Benchmax owns rollout-group concurrency, so leave them unset"
    )


def test_preset_model_name_is_rejected(
    make_env: Callable[..., HarborEnv], make_template: Callable[..., HarborTrialTemplate]
) -> None:
    agent = AgentConfig(import_path=AGENT_IMPORT_PATH, model_name="openai/alias")
    with pytest.raises(ValueError) as caught:
        make_env(trial=make_template(agent=agent))
    assert str(caught.value).startswith("trial.agent.model_name must be unset: every rollout")
    assert "openai/<request model>" in str(caught.value)

    source = BundledAgentSource.from_files({"agent.py": b"X = 1\n"})
    bundled = BundledHarborAgent(
        AgentConfig(import_path="agent:CleanAgent", model_name="preset"), source
    )
    with pytest.raises(ValueError, match="model_name must be unset"):
        make_env(trial=make_template(agent=bundled))


@pytest.mark.parametrize("ratio", [1.0, 1, -0.1, float("nan"), 10**400, True, "0.1"])
def test_eval_ratio_is_validated(make_env: Callable[..., HarborEnv], ratio: object) -> None:
    with pytest.raises(ValueError) as caught:
        make_env(eval_ratio=ratio)
    assert str(caught.value) == "eval_ratio must satisfy 0 <= eval_ratio < 1"


@pytest.mark.parametrize(
    ("keys", "error", "message"),
    [
        ("reward", TypeError, "reward_keys must be a sequence of strings"),
        (b"reward", TypeError, "reward_keys must be a sequence of strings"),
        ({"reward"}, TypeError, "reward_keys must be a sequence of strings"),
        ((), ValueError, "reward_keys must declare at least one verifier reward"),
        (("reward", "reward"), ValueError, "reward_keys must not contain duplicates"),
        (("",), ValueError, "reward_keys must contain non-empty strings"),
        (("  ",), ValueError, "reward_keys must contain non-empty strings"),
        (("reward", 1), ValueError, "reward_keys must contain non-empty strings"),
    ],
)
def test_reward_keys_are_validated(
    make_env: Callable[..., HarborEnv], keys: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as caught:
        make_env(reward_keys=keys)
    assert str(caught.value) == message


def test_reward_keys_are_stored_as_a_tuple_in_order(make_env: Callable[..., HarborEnv]) -> None:
    env = make_env(reward_keys=["reward", "partial_credit"])
    assert env.reward_keys == ("reward", "partial_credit")


@pytest.mark.parametrize("limit", [0, -1, True, 1.5, "2"])
def test_max_concurrent_trials_is_validated(
    make_env: Callable[..., HarborEnv], limit: object
) -> None:
    with pytest.raises(ValueError) as caught:
        make_env(max_concurrent_trials=limit)
    assert str(caught.value) == "max_concurrent_trials must be a positive integer or None"


def test_validation_runs_in_the_documented_order(
    tmp_path: Path, make_template: Callable[..., HarborTrialTemplate]
) -> None:
    """Start from arguments that break every rule, then fix one rule at a time."""
    good_agent = AgentConfig(import_path=AGENT_IMPORT_PATH)
    modal = EnvironmentConfig(type=EnvironmentType.MODAL)
    arguments: dict[str, Any] = {
        "dataset": "not-a-config",
        "eval_dataset": 42,
        "trial": object(),
        "reward_keys": "reward",
        "eval_ratio": 1.0,
        "sandbox_credentials": object(),
        "max_concurrent_trials": 0,
    }
    broken_agent = AgentConfig(import_path=AGENT_IMPORT_PATH, model_name="x", n_concurrent=2)

    def template(**fields: Any) -> HarborTrialTemplate:
        return make_template(**fields)

    steps: list[tuple[type[Exception], str, Callable[[], None]]] = [
        (
            TypeError,
            "dataset must be Harbor DatasetConfig, got str",
            lambda: arguments.update(dataset=DatasetConfig(path=tmp_path)),
        ),
        (
            TypeError,
            "eval_dataset must be Harbor DatasetConfig when provided, got int",
            lambda: arguments.update(eval_dataset=None),
        ),
        (
            TypeError,
            "trial must be HarborTrialTemplate, got object",
            lambda: arguments.update(
                trial=template(agent="agent", environment="env", verifier="verifier")
            ),
        ),
        (
            TypeError,
            "trial.agent must be Harbor AgentConfig or BundledHarborAgent",
            lambda: arguments.update(
                trial=template(agent=broken_agent, environment="env", verifier="verifier")
            ),
        ),
        (
            ValueError,
            "trial.agent.model_name must be unset",
            lambda: arguments.update(
                trial=template(
                    agent=broken_agent.model_copy(update={"model_name": None}),
                    environment="env",
                    verifier="verifier",
                )
            ),
        ),
        (
            TypeError,
            "trial.environment must be Harbor EnvironmentConfig",
            lambda: arguments.update(
                trial=template(
                    agent=broken_agent.model_copy(update={"model_name": None}),
                    environment=modal,
                    verifier="verifier",
                )
            ),
        ),
        (
            TypeError,
            "trial.verifier must be Harbor VerifierConfig",
            lambda: arguments.update(
                trial=template(
                    agent=broken_agent.model_copy(update={"model_name": None}),
                    environment=modal,
                    verifier=VerifierConfig(disable=True),
                )
            ),
        ),
        (
            ValueError,
            "HarborEnv requires an enabled verifier to produce rewards",
            lambda: arguments.update(
                trial=template(
                    agent=broken_agent.model_copy(update={"model_name": None}),
                    environment=modal,
                    verifier=VerifierConfig(),
                )
            ),
        ),
        (
            ValueError,
            "eval_ratio must satisfy 0 <= eval_ratio < 1",
            lambda: arguments.update(eval_ratio=0.1),
        ),
        (
            TypeError,
            "sandbox_credentials must implement SandboxCredentials, got object",
            lambda: arguments.update(sandbox_credentials=DaytonaCredentials(api_key="k")),
        ),
        (
            ValueError,
            "max_concurrent_trials must be a positive integer or None",
            lambda: arguments.update(max_concurrent_trials=2),
        ),
        (
            ValueError,
            "Benchmax owns rollout-group concurrency",
            lambda: arguments.update(
                trial=template(agent=good_agent, environment=modal, verifier=VerifierConfig())
            ),
        ),
        (
            ValueError,
            "'daytona' sandbox credentials do not match configured Harbor sandbox 'modal'",
            lambda: arguments.update(sandbox_credentials=MODAL),
        ),
        (
            TypeError,
            "reward_keys must be a sequence of strings",
            lambda: arguments.update(reward_keys=["reward"]),
        ),
    ]
    for error, message, fix in steps:
        with pytest.raises(error) as caught:
            HarborEnv(**arguments)
        assert message in str(caught.value), (message, str(caught.value))
        fix()
    env = HarborEnv(**arguments)
    assert env.reward_keys == ("reward",)


@pytest.mark.parametrize(
    ("sandbox", "credentials", "message"),
    [
        (
            EnvironmentType.DOCKER,
            MODAL,
            "'modal' sandbox credentials do not match configured Harbor sandbox 'docker'",
        ),
        (
            EnvironmentType.DAYTONA,
            MODAL,
            "'modal' sandbox credentials do not match configured Harbor sandbox 'daytona'",
        ),
        (
            EnvironmentType.MODAL,
            CustomSandboxCredentials({"X": "y"}, provider="e2b"),
            "'e2b' sandbox credentials do not match configured Harbor sandbox 'modal'",
        ),
    ],
)
def test_provider_mismatch_is_rejected(
    make_env: Callable[..., HarborEnv],
    make_template: Callable[..., HarborTrialTemplate],
    sandbox: EnvironmentType,
    credentials: Any,
    message: str,
) -> None:
    with pytest.raises(ValueError) as caught:
        make_env(
            trial=make_template(environment=EnvironmentConfig(type=sandbox)),
            sandbox_credentials=credentials,
        )
    assert str(caught.value) == message


@pytest.mark.parametrize(
    "sandbox", [EnvironmentType.MODAL, EnvironmentType.DAYTONA, EnvironmentType.DOCKER]
)
def test_provider_free_credentials_fit_any_sandbox(
    make_env: Callable[..., HarborEnv],
    make_template: Callable[..., HarborTrialTemplate],
    sandbox: EnvironmentType,
) -> None:
    credentials = CustomSandboxCredentials({"TOKEN": "value"})
    env = make_env(
        trial=make_template(environment=EnvironmentConfig(type=sandbox)),
        sandbox_credentials=credentials,
    )
    assert env._sandbox_credentials is credentials


def test_other_sandboxes_need_no_credentials_and_import_paths_skip_the_check(
    make_env: Callable[..., HarborEnv], make_template: Callable[..., HarborTrialTemplate]
) -> None:
    make_env(trial=make_template(environment=EnvironmentConfig(type=EnvironmentType.DOCKER)))
    make_env(trial=make_template(environment=EnvironmentConfig(type=EnvironmentType.E2B)))
    # A custom sandbox import path is never checked against provider credentials.
    make_env(sandbox_credentials=MODAL)
    daytona = DaytonaCredentials(api_key="k")
    make_env(sandbox_credentials=daytona)


def test_modal_defaults_are_added_without_mutating_the_template(
    make_env: Callable[..., HarborEnv], make_template: Callable[..., HarborTrialTemplate]
) -> None:
    template = _modal_template(make_template, region="us-east")
    env = make_env(trial=template, sandbox_credentials=MODAL)
    assert env._trial is not template
    assert env._trial.environment.kwargs == {
        "region": "us-east",
        "app_name": "harbor-benchmax",
        "sandbox_timeout_secs": 3600,
        "sandbox_idle_timeout_secs": 1800,
    }
    assert template.environment.kwargs == {"region": "us-east"}
    assert env._trial.agent is template.agent
    assert env._trial.trials_dir == template.trials_dir


def test_modal_user_values_are_preserved(
    make_env: Callable[..., HarborEnv], make_template: Callable[..., HarborTrialTemplate]
) -> None:
    template = _modal_template(
        make_template,
        app_name="custom-app",
        sandbox_timeout_secs=7200,
        sandbox_idle_timeout_secs=2400,
    )
    env = make_env(trial=template, sandbox_credentials=MODAL)
    assert env._trial.environment.kwargs == {
        "app_name": "custom-app",
        "sandbox_timeout_secs": 7200,
        "sandbox_idle_timeout_secs": 2400,
    }


def test_non_modal_sandboxes_get_no_defaults(
    make_env: Callable[..., HarborEnv], make_template: Callable[..., HarborTrialTemplate]
) -> None:
    template = make_template(environment=EnvironmentConfig(type=EnvironmentType.DOCKER))
    env = make_env(trial=template)
    assert env._trial is template
    assert "app_name" not in env._trial.environment.kwargs
    custom = make_env()
    assert "app_name" not in custom._trial.environment.kwargs


def test_requires_public_model_endpoint_flag(make_env: Callable[..., HarborEnv]) -> None:
    assert make_env().requires_public_model_endpoint is True
    assert make_env(requires_public_model_endpoint=False).requires_public_model_endpoint is False


def test_datasets_are_deep_copies(make_env: Callable[..., HarborEnv], tmp_path: Path) -> None:
    dataset = DatasetConfig(path=tmp_path / "a", task_names=["x"])
    eval_dataset = DatasetConfig(path=tmp_path / "b")
    env = make_env(dataset=dataset, eval_dataset=eval_dataset, eval_ratio=0)
    dataset.task_names.append("y")  # type: ignore[union-attr]
    assert env._dataset.task_names == ["x"]
    assert env._eval_dataset == eval_dataset and env._eval_dataset is not eval_dataset
    assert env._eval_ratio == 0.0 and type(env._eval_ratio) is float


def _create_agent(config: AgentConfig, tmp_path: Path) -> Any:
    return AgentFactory.create_agent_from_config(config, logs_dir=tmp_path / "agent-logs")


def test_trial_agent_stays_usable_with_harbor_agent_factory(
    make_env: Callable[..., HarborEnv],
    make_template: Callable[..., HarborTrialTemplate],
    tmp_path: Path,
) -> None:
    built_in = AgentConfig(name="claude-code", kwargs={"version": "1.2.3"})
    env = make_env(trial=make_template(agent=built_in))
    assert env._trial.agent is built_in
    agent = _create_agent(env._trial.agent, tmp_path)
    assert type(agent).__name__ == "ClaudeCode" and agent.version() == "1.2.3"

    custom = AgentConfig(import_path=AGENT_IMPORT_PATH, kwargs={"delay": 0.25})
    env = make_env(trial=make_template(agent=custom))
    agent = _create_agent(env._trial.agent, tmp_path)
    assert isinstance(agent, RecordingAgent) and agent._delay == 0.25


@pytest.mark.slow
def test_mini_swe_agent_resolves_from_the_trial_agent(
    make_env: Callable[..., HarborEnv],
    make_template: Callable[..., HarborTrialTemplate],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Slow: importing mini-swe-agent imports litellm (several seconds)."""
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    env = make_env(
        trial=make_template(agent=AgentConfig(name="mini-swe-agent", kwargs={"version": "9.9"}))
    )
    agent = _create_agent(env._trial.agent, tmp_path)
    assert type(agent).__name__ == "MiniSweAgent" and agent.version() == "9.9"
    assert "litellm" in sys.modules


def test_bundled_agent_is_kept_as_given(
    make_env: Callable[..., HarborEnv], make_template: Callable[..., HarborTrialTemplate]
) -> None:
    source = BundledAgentSource.from_files({"agent.py": b"X = 1\n"})
    bundled = BundledHarborAgent(AgentConfig(import_path="agent:CleanAgent"), source)
    env = make_env(trial=make_template(agent=bundled))
    assert env._trial.agent is bundled


async def test_aclose_is_a_no_op_and_group_rewards_are_not_overridden(
    make_env: Callable[..., HarborEnv],
) -> None:
    env = make_env()
    assert await env.aclose() is None
    assert await env.compute_group_rewards([]) is None
    assert "compute_group_rewards" not in HarborEnv.__dict__
