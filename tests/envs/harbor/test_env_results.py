"""Trial result normalization, exception mapping, logging and RewardKit partial credit."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from harbor.models.environment_type import EnvironmentType
from harbor.models.trial.config import AgentConfig, EnvironmentConfig, TaskConfig
from harbor.trial.errors import AgentTimeoutError, VerifierTimeoutError
from tests.envs.harbor.conftest import ScriptedTrials, make_request, result

from benchmax.envs.harbor import HarborEnv, HarborTrialTemplate
from benchmax.envs.shared_types import RolloutOutcome

KEYS = ("reward", "accuracy")
ZERO = {"reward": 0.0, "accuracy": 0.0}


def _messages(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == "benchmax.envs.harbor.env" and record.levelno == level
    ]


async def test_verifier_rewards_finish_as_floats(
    make_env: Callable[..., HarborEnv],
    task_payload: TaskConfig,
    scripted_trials: ScriptedTrials,
    harbor_logs: pytest.LogCaptureFixture,
) -> None:
    scripted_trials.outcomes["ok"] = result(rewards={"reward": 1, "accuracy": "0.5"})
    outcomes = await make_env(reward_keys=KEYS).run_group([make_request("ok", task_payload)])
    assert outcomes["ok"] == RolloutOutcome(
        rewards={"reward": 1.0, "accuracy": 0.5}, termination_reason="finished"
    )
    assert all(type(value) is float for value in outcomes["ok"].rewards.values())
    infos = _messages(harbor_logs, logging.INFO)
    assert infos[0].startswith("harbor.rollout.start rollout_id=ok task=example-1 sandbox=")
    assert infos[0].endswith(
        "harness=tests.envs.harbor.harbor_fakes:RecordingAgent model=openai/trainer-model"
    )
    assert "sandbox=tests.envs.harbor.harbor_fakes:LocalFakeSandbox" in infos[0]
    assert infos[-1] == (
        "harbor.rollout.done rollout_id=ok termination_reason=finished "
        "rewards={'reward': 1.0, 'accuracy': 0.5}"
    )


@pytest.mark.parametrize(
    ("exception_type", "reason"),
    [
        ("AgentTimeoutError", "harness_timeout"),
        ("VerifierTimeoutError", "verifier_timeout"),
        ("SandboxBuildFailedError", "sandbox_error"),
        ("ContextLengthExceededError", "context_exceeded"),
        ("ContextWindowExceededError", "context_exceeded"),
        ("OutputLengthExceededError", "output_exceeded"),
        ("NonZeroAgentExitCodeError", "harness_error"),
        ("RuntimeError", "harness_error"),
    ],
)
@pytest.mark.parametrize("with_rewards", [True, False])
async def test_returned_exception_info_zeroes_rewards(
    make_env: Callable[..., HarborEnv],
    task_payload: TaskConfig,
    scripted_trials: ScriptedTrials,
    harbor_logs: pytest.LogCaptureFixture,
    exception_type: str,
    reason: str,
    with_rewards: bool,
) -> None:
    rewards = {"reward": 1.0, "accuracy": 1.0} if with_rewards else None
    scripted_trials.outcomes["failed"] = result(
        rewards=rewards, exception=(exception_type, "it went wrong")
    )
    scripted_trials.outcomes["sibling"] = result(rewards={"reward": 0.5, "accuracy": 1.0})
    env = make_env(reward_keys=KEYS)
    requests = [make_request("failed", task_payload), make_request("sibling", task_payload)]
    outcomes = await env.run_group(requests)
    assert outcomes["failed"] == RolloutOutcome(rewards=ZERO, termination_reason=reason)
    assert outcomes["sibling"].termination_reason == "finished"
    assert (
        f"harbor.rollout.zero_reward rollout_id=failed error={exception_type}: it went wrong"
        in _messages(harbor_logs, logging.ERROR)
    )


async def test_no_rewards_and_no_exception_is_a_verifier_error(
    make_env: Callable[..., HarborEnv],
    task_payload: TaskConfig,
    scripted_trials: ScriptedTrials,
    harbor_logs: pytest.LogCaptureFixture,
) -> None:
    scripted_trials.outcomes["none"] = result()
    scripted_trials.outcomes["empty"] = result(rewards={})
    requests = [make_request("none", task_payload), make_request("empty", task_payload)]
    outcomes = await make_env(reward_keys=KEYS).run_group(requests)
    for rollout_id in ("none", "empty"):
        assert outcomes[rollout_id] == RolloutOutcome(
            rewards=ZERO, termination_reason="verifier_error"
        )
    errors = _messages(harbor_logs, logging.ERROR)
    assert (
        "harbor.rollout.zero_reward rollout_id=none error=the verifier returned no rewards"
        in errors
    )
    assert all("verifier returned no rewards" in e for e in errors if "zero_reward" in e)


class SandboxBuildFailedError(Exception):
    """A local class: termination mapping is by class name, not by identity."""


@pytest.mark.parametrize(
    ("error", "reason", "stage"),
    [
        (SandboxBuildFailedError("image build broke"), "sandbox_error", "create"),
        (VerifierTimeoutError("verifier too slow"), "verifier_timeout", "run"),
        (AgentTimeoutError("agent too slow"), "harness_timeout", "run"),
        (RuntimeError("something odd"), "harness_error", "run"),
        (OSError("disk full"), "harness_error", "create"),
    ],
)
async def test_raised_exceptions_map_by_class_name_without_cancelling_siblings(
    make_env: Callable[..., HarborEnv],
    task_payload: TaskConfig,
    scripted_trials: ScriptedTrials,
    harbor_logs: pytest.LogCaptureFixture,
    error: Exception,
    reason: str,
    stage: str,
) -> None:
    scripted_trials.outcomes["boom"] = ("create", error) if stage == "create" else error
    env = make_env(reward_keys=KEYS)
    requests = [make_request("boom", task_payload), make_request("sibling", task_payload)]
    scripted_trials.outcomes["sibling"] = result(rewards={"reward": 1.0, "accuracy": 0.25})
    outcomes = await env.run_group(requests)
    assert outcomes["boom"] == RolloutOutcome(rewards=ZERO, termination_reason=reason)
    assert outcomes["sibling"] == RolloutOutcome(
        rewards={"reward": 1.0, "accuracy": 0.25}, termination_reason="finished"
    )
    failed = [
        record
        for record in harbor_logs.records
        if record.getMessage() == "harbor.rollout.failed rollout_id=boom task=example-1"
    ]
    assert len(failed) == 1 and failed[0].levelno == logging.ERROR
    assert failed[0].exc_info is not None and failed[0].exc_info[1] is error
    assert str(error) in harbor_logs.text  # the traceback (with the message) is logged


async def test_non_numeric_reward_raises_after_sibling_finished(
    make_env: Callable[..., HarborEnv],
    task_payload: TaskConfig,
    scripted_trials: ScriptedTrials,
    harbor_logs: pytest.LogCaptureFixture,
) -> None:
    scripted_trials.outcomes["bad"] = result(rewards={"reward": "not-numeric"})
    scripted_trials.outcomes["sibling"] = result(rewards={"reward": 1.0})
    env = make_env()
    requests = [make_request("bad", task_payload), make_request("sibling", task_payload)]
    with pytest.raises(ValueError) as caught:
        await env.run_group(requests)
    assert str(caught.value) == "could not convert string to float: 'not-numeric'"
    done = _messages(harbor_logs, logging.INFO)
    assert any(m.startswith("harbor.rollout.done rollout_id=sibling") for m in done)


async def test_mismatched_verifier_keys_settle_as_group_reward_error(
    make_env: Callable[..., HarborEnv],
    task_payload: TaskConfig,
    scripted_trials: ScriptedTrials,
) -> None:
    scripted_trials.outcomes["r"] = result(rewards={"reward": 1.0, "surprise": 2.0})
    outcomes = await make_env().run_group([make_request("r", task_payload)])
    assert outcomes["r"] == RolloutOutcome(
        rewards={"reward": 0.0}, termination_reason="group_reward_error"
    )


# --- RewardKit partial credit -----------------------------------------------------------


def _write_details(trials_dir: Path, rollout_id: str, content: str) -> Path:
    path = trials_dir / rollout_id / "verifier" / "reward-details.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("document", "credit"),
    [
        ({"reward": {"criteria": [{"weight": 1, "value": 1}, {"weight": 3, "value": 0.5}]}}, 0.625),
        ({"criteria": [{"value": 0.5}, {"weight": 0, "value": 1}]}, 0.5),
        ({"criteria": [{"weight": 2}]}, 0.0),
        ({"criteria": [{"weight": 1, "value": 1.5}]}, 1.5),
        ({"criteria": []}, 0.0),
        ({"criteria": [{"weight": 0, "value": 1}]}, 0.0),
        ({"criteria": [{"weight": -1, "value": 1}]}, 0.0),
        ({"criteria": [{"weight": -1, "value": 1}, {"weight": 3, "value": 1}]}, 0.0),
        ({"criteria": [{"weight": True, "value": 1}]}, 0.0),
        ({"criteria": [{"weight": 1, "value": "1"}]}, 0.0),
        ({"criteria": [{"weight": 1, "value": False}]}, 0.0),
        ({"criteria": ["not an object"]}, 0.0),
        ({"reward": 1.0}, 0.0),
        ({"other": 1}, 0.0),
        ([{"criteria": [{"value": 1}]}], 0.0),
        ({"criteria": [{"value": float("nan")}]}, 0.0),
        ({"criteria": [{"weight": float("inf"), "value": 1}]}, 0.0),
        # An integer too large for a float is unusable, not a crash of the whole group.
        ({"criteria": [{"weight": 10**400, "value": 1}]}, 0.0),
        ({"criteria": [{"weight": 1, "value": -(10**400)}]}, 0.0),
    ],
)
async def test_partial_credit_from_reward_details(
    make_env: Callable[..., HarborEnv],
    task_payload: TaskConfig,
    scripted_trials: ScriptedTrials,
    document: object,
    credit: float,
) -> None:
    env = make_env(reward_keys=("reward", "partial_credit"))
    _write_details(env._trial.trials_dir, "pc", json.dumps(document))
    scripted_trials.outcomes["pc"] = result(rewards={"reward": 1.0})
    outcomes = await env.run_group([make_request("pc", task_payload)])
    assert outcomes["pc"] == RolloutOutcome(
        rewards={"reward": 1.0, "partial_credit": credit}, termination_reason="finished"
    )


async def test_partial_credit_edge_cases(
    make_env: Callable[..., HarborEnv],
    task_payload: TaskConfig,
    scripted_trials: ScriptedTrials,
    harbor_logs: pytest.LogCaptureFixture,
) -> None:
    env = make_env(reward_keys=("reward", "partial_credit"))
    trials_dir = env._trial.trials_dir
    good = json.dumps({"criteria": [{"value": 1.0}]})

    # Missing file → 0.0.
    scripted_trials.outcomes["missing"] = result(rewards={"reward": 1.0})
    # Invalid JSON → 0.0 with a warning naming the path.
    invalid = _write_details(trials_dir, "invalid", "{not json")
    scripted_trials.outcomes["invalid"] = result(rewards={"reward": 1.0})
    # Reported partial_credit wins over the details file.
    _write_details(trials_dir, "reported", good)
    scripted_trials.outcomes["reported"] = result(rewards={"reward": 1.0, "partial_credit": 0.3})
    for rollout_id in ("missing", "invalid", "reported"):
        outcomes = await env.run_group([make_request(rollout_id, task_payload)])
        expected = 0.3 if rollout_id == "reported" else 0.0
        assert outcomes[rollout_id].rewards == {"reward": 1.0, "partial_credit": expected}

    warnings = [r for r in harbor_logs.records if r.levelno == logging.WARNING]
    assert [r.getMessage() for r in warnings] == [
        f"harbor.rewardkit.invalid_details path={invalid}"
    ]
    assert warnings[0].exc_info is not None

    # Without a "reward" key the details are not consulted.
    _write_details(trials_dir, "no-reward", good)
    scripted_trials.outcomes["no-reward"] = result(rewards={"accuracy": 1.0})
    env_two = make_env(reward_keys=("accuracy", "partial_credit"))
    outcomes = await env_two.run_group([make_request("no-reward", task_payload)])
    assert outcomes["no-reward"].rewards == {"accuracy": 1.0, "partial_credit": 0.0}


async def test_start_log_names_sandbox_type_and_agent_name(
    make_env: Callable[..., HarborEnv],
    make_template: Callable[..., HarborTrialTemplate],
    task_payload: TaskConfig,
    scripted_trials: ScriptedTrials,
    harbor_logs: pytest.LogCaptureFixture,
) -> None:
    scripted_trials.outcomes["named"] = RuntimeError("trial broke")
    template = make_template(
        agent=AgentConfig(name="terminus-2"),
        environment=EnvironmentConfig(type=EnvironmentType.DOCKER),
    )
    await make_env(trial=template, reward_keys=KEYS).run_group(
        [make_request("named", task_payload, model="Qwen/Qwen3.5-4B")]
    )
    assert _messages(harbor_logs, logging.INFO) == [
        "harbor.rollout.start rollout_id=named task=example-1 sandbox=docker "
        "harness=terminus-2 model=openai/Qwen/Qwen3.5-4B",
        "harbor.rollout.done rollout_id=named termination_reason=harness_error "
        "rewards={'reward': 0.0, 'accuracy': 0.0}",
    ]
