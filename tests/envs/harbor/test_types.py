"""HarborTrialTemplate: required configs, normalization, validation and repr."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from harbor.models.trial.config import AgentConfig, EnvironmentConfig, VerifierConfig

from benchmax.envs.harbor import HarborTrialTemplate

AGENT = AgentConfig(name="nop", env={"OPENAI_API_KEY": "sk-template-secret"})
SANDBOX = EnvironmentConfig()
VERIFIER = VerifierConfig(env={"JUDGE_KEY": "judge-secret"})


def test_defaults() -> None:
    template = HarborTrialTemplate(AGENT, SANDBOX, VERIFIER)
    assert template.trials_dir == Path("trials")
    assert template.timeout_multiplier == 1.0
    assert template.agent_timeout_multiplier is None
    assert template.artifacts == ()
    assert template.extra_instruction_paths == ()
    assert template.agent is AGENT


@pytest.mark.parametrize(
    ("missing", "message"),
    [
        ("agent", "Harbor trial agent config is required"),
        ("environment", "Harbor trial environment config is required"),
        ("verifier", "Harbor trial verifier config is required"),
    ],
)
def test_configs_are_required(missing: str, message: str) -> None:
    fields = {"agent": AGENT, "environment": SANDBOX, "verifier": VERIFIER, missing: None}
    with pytest.raises(ValueError) as caught:
        HarborTrialTemplate(**fields)
    assert str(caught.value) == message


def test_agent_is_checked_before_environment_and_verifier() -> None:
    with pytest.raises(ValueError, match="agent config is required"):
        HarborTrialTemplate(None, None, None)  # type: ignore[arg-type]


def test_paths_expand_user_and_artifacts_become_a_tuple() -> None:
    template = HarborTrialTemplate(
        AGENT,
        SANDBOX,
        VERIFIER,
        trials_dir="~/trials",  # type: ignore[arg-type]
        artifacts=["/logs/out.txt"],  # type: ignore[arg-type]
        extra_instruction_paths=["~/extra.md", Path("plain.md")],  # type: ignore[arg-type]
    )
    assert template.trials_dir == Path.home() / "trials"
    assert template.artifacts == ("/logs/out.txt",)
    assert template.extra_instruction_paths == (Path.home() / "extra.md", Path("plain.md"))


def test_empty_trials_dir_normalizes_to_current_directory() -> None:
    template = HarborTrialTemplate(AGENT, SANDBOX, VERIFIER, trials_dir="")  # type: ignore[arg-type]
    assert template.trials_dir == Path(".")


@pytest.mark.parametrize(
    "name",
    [
        "timeout_multiplier",
        "agent_timeout_multiplier",
        "verifier_timeout_multiplier",
        "agent_setup_timeout_multiplier",
        "environment_build_timeout_multiplier",
    ],
)
@pytest.mark.parametrize("value", [0, -1.5])
def test_non_positive_multipliers_are_rejected(name: str, value: float) -> None:
    with pytest.raises(ValueError) as caught:
        HarborTrialTemplate(AGENT, SANDBOX, VERIFIER, **{name: value})
    assert str(caught.value) == f"{name} must be positive when provided"


def test_multipliers_are_checked_in_field_order() -> None:
    with pytest.raises(ValueError, match=r"^timeout_multiplier must"):
        HarborTrialTemplate(
            AGENT, SANDBOX, VERIFIER, timeout_multiplier=0, verifier_timeout_multiplier=0
        )
    template = HarborTrialTemplate(AGENT, SANDBOX, VERIFIER, agent_timeout_multiplier=2.5)
    assert template.agent_timeout_multiplier == 2.5


def test_repr_shows_only_directory_multiplier_and_artifact_count() -> None:
    template = HarborTrialTemplate(AGENT, SANDBOX, VERIFIER, artifacts=("/a", "/b"))
    assert repr(template) == (
        "HarborTrialTemplate(trials_dir=PosixPath('trials'), timeout_multiplier=1.0, artifacts=2)"
    )
    assert "secret" not in repr(template) and "secret" not in str(template)


def test_frozen_equal_and_replace_renormalizes() -> None:
    template = HarborTrialTemplate(AGENT, SANDBOX, VERIFIER)
    assert template == HarborTrialTemplate(AGENT, SANDBOX, VERIFIER)
    with pytest.raises(dataclasses.FrozenInstanceError):
        template.timeout_multiplier = 2.0  # type: ignore[misc]
    replaced = dataclasses.replace(template, trials_dir="~/other", artifacts=["/x"])  # type: ignore[arg-type]
    assert replaced.trials_dir == Path.home() / "other"
    assert replaced.artifacts == ("/x",)
    with pytest.raises(ValueError, match="timeout_multiplier must be positive"):
        dataclasses.replace(template, timeout_multiplier=0)
