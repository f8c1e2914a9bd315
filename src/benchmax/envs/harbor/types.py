"""The per-environment Harbor trial settings shared by every rollout."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harbor.models.task.config import ArtifactConfig
    from harbor.models.trial.config import AgentConfig, EnvironmentConfig, VerifierConfig

    from benchmax.envs.harbor.bundled_agent import BundledHarborAgent

__all__ = ["HarborTrialTemplate"]

_MULTIPLIERS = (
    "timeout_multiplier",
    "agent_timeout_multiplier",
    "verifier_timeout_multiplier",
    "agent_setup_timeout_multiplier",
    "environment_build_timeout_multiplier",
)


@dataclass(frozen=True, slots=True, repr=False)
class HarborTrialTemplate:
    """Every Harbor ``TrialConfig`` setting that is the same for all rollouts.

    ``HarborEnv`` adds the per-rollout parts (task, trial name, model routing) when it
    builds each concrete trial. The repr omits the agent, environment and verifier
    configs because their ``env`` values may carry secrets.
    """

    agent: AgentConfig | BundledHarborAgent
    environment: EnvironmentConfig
    verifier: VerifierConfig
    trials_dir: Path = Path("trials")
    timeout_multiplier: float = 1.0
    agent_timeout_multiplier: float | None = None
    verifier_timeout_multiplier: float | None = None
    agent_setup_timeout_multiplier: float | None = None
    environment_build_timeout_multiplier: float | None = None
    artifacts: tuple[str | ArtifactConfig, ...] = ()
    extra_instruction_paths: tuple[Path, ...] = ()

    def __post_init__(self) -> None:
        if self.agent is None:
            raise ValueError("Harbor trial agent config is required")
        if self.environment is None:
            raise ValueError("Harbor trial environment config is required")
        if self.verifier is None:
            raise ValueError("Harbor trial verifier config is required")
        trials_dir = Path(self.trials_dir).expanduser()
        if not str(trials_dir):
            raise ValueError("Harbor trials_dir must be non-empty")
        object.__setattr__(self, "trials_dir", trials_dir)
        object.__setattr__(self, "artifacts", tuple(self.artifacts))
        object.__setattr__(
            self,
            "extra_instruction_paths",
            tuple(Path(path).expanduser() for path in self.extra_instruction_paths),
        )
        for name in _MULTIPLIERS:
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive when provided")

    def __repr__(self) -> str:
        return (
            f"HarborTrialTemplate(trials_dir={self.trials_dir!r}, "
            f"timeout_multiplier={self.timeout_multiplier!r}, "
            f"artifacts={len(self.artifacts)})"
        )
