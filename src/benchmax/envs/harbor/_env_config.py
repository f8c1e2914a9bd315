"""Constructor checks and provider defaults of ``HarborEnv`` (in contract order)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from benchmax._value_checks import is_int_at_least
from benchmax.envs._reward_keys import declared_reward_keys
from benchmax.envs.harbor.bundled_agent import BundledHarborAgent
from benchmax.envs.harbor.credentials import SandboxCredentials
from benchmax.envs.harbor.types import HarborTrialTemplate

if TYPE_CHECKING:
    from harbor.models.trial.config import AgentConfig, EnvironmentConfig

__all__ = [
    "check_credentials_type",
    "check_job_queue_settings",
    "check_max_concurrent_trials",
    "check_sandbox_credentials",
    "check_trial",
    "normalize_reward_keys",
    "with_provider_defaults",
]

_MODAL_DEFAULTS = {
    "app_name": "harbor-benchmax",
    "sandbox_timeout_secs": 3600,
    "sandbox_idle_timeout_secs": 1800,
}
_PROVIDERS_REQUIRING_CREDENTIALS = ("modal", "daytona")


def check_trial(trial: object) -> AgentConfig:
    """Validate the template's types and verifier; return the underlying agent config."""
    from harbor.models.trial.config import AgentConfig, EnvironmentConfig, VerifierConfig

    if not isinstance(trial, HarborTrialTemplate):
        raise TypeError(f"trial must be HarborTrialTemplate, got {type(trial).__name__}")
    agent = trial.agent
    if isinstance(agent, BundledHarborAgent):
        agent_config = agent.config
    elif isinstance(agent, AgentConfig):
        agent_config = agent
    else:
        raise TypeError("trial.agent must be Harbor AgentConfig or BundledHarborAgent")
    if agent_config.model_name:
        raise ValueError(
            "trial.agent.model_name must be unset: every rollout serves exactly the requested "
            "model, which HarborEnv routes as openai/<request model>. A harness that needs its "
            "own alias must implement that override itself."
        )
    if not isinstance(trial.environment, EnvironmentConfig):
        raise TypeError("trial.environment must be Harbor EnvironmentConfig")
    if not isinstance(trial.verifier, VerifierConfig):
        raise TypeError("trial.verifier must be Harbor VerifierConfig")
    if trial.verifier.disable:
        raise ValueError("HarborEnv requires an enabled verifier to produce rewards")
    return agent_config


def check_credentials_type(credentials: object) -> None:
    """Reject credentials that do not implement the ``SandboxCredentials`` protocol."""
    if credentials is not None and not isinstance(credentials, SandboxCredentials):
        raise TypeError(
            "sandbox_credentials must implement SandboxCredentials, "
            f"got {type(credentials).__name__}"
        )


def check_max_concurrent_trials(limit: object) -> int | None:
    """Return the positive trial cap, or ``None`` for no cap."""
    if limit is None:
        return None
    if not is_int_at_least(limit, 1):
        raise ValueError("max_concurrent_trials must be a positive integer or None")
    return limit


def check_job_queue_settings(agent_config: AgentConfig) -> None:
    """Reject Harbor job-queue concurrency settings; benchmax owns group concurrency."""
    if agent_config.n_concurrent is not None or agent_config.concurrency_group is not None:
        raise ValueError(
            "agent.n_concurrent and agent.concurrency_group belong to Harbor's job queue; "
            "Benchmax owns rollout-group concurrency, so leave them unset"
        )


def check_sandbox_credentials(
    environment: EnvironmentConfig, credentials: SandboxCredentials | None
) -> None:
    """Require explicit credentials for Modal/Daytona and reject a provider mismatch."""
    if environment.import_path is not None or environment.type is None:
        return
    sandbox = str(environment.type.value)
    if sandbox in _PROVIDERS_REQUIRING_CREDENTIALS and credentials is None:
        raise ValueError(
            f"configured Harbor sandbox {sandbox!r} requires explicit sandbox_credentials"
        )
    if credentials is not None:
        provider = credentials.provider
        if provider is not None and provider != sandbox:
            raise ValueError(
                f"{provider!r} sandbox credentials do not match configured Harbor sandbox "
                f"{sandbox!r}"
            )


def normalize_reward_keys(reward_keys: object) -> tuple[str, ...]:
    """Return the declared verifier reward keys as a validated tuple."""
    return declared_reward_keys(reward_keys, kind="verifier reward")


def with_provider_defaults(trial: HarborTrialTemplate) -> HarborTrialTemplate:
    """Add Modal's set-if-absent sandbox defaults; other sandboxes get the template as is."""
    from harbor.models.environment_type import EnvironmentType

    if trial.environment.type != EnvironmentType.MODAL:
        return trial
    environment = trial.environment.model_copy(deep=True)
    for key, value in _MODAL_DEFAULTS.items():
        environment.kwargs.setdefault(key, value)
    return dataclasses.replace(trial, environment=environment)
