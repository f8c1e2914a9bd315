"""What one training step's rollouts say: the numbers of a ``metrics.jsonl`` line.

``step_metrics(step, groups, weights)`` summarizes the groups of one step (each a
sequence of trajectories); ``trainer_metrics(logs)`` picks TRL's numbers out of a log
record; ``tracker_metrics(line)`` flattens a line into the ``benchmax/...`` scalars sent
to TRL's ``report_to`` trackers. Every field is documented in ``docs/training.md``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Required, TypedDict

from benchmax.results._advantages import group_advantages, scalar_reward
from benchmax.trajectory import Trajectory

__all__ = [
    "TRAINER_KEYS",
    "MetricsLine",
    "StepSeconds",
    "Stats",
    "step_metrics",
    "tracker_metrics",
    "trainer_metrics",
]


class Stats(TypedDict):
    """Mean, population standard deviation, min and max (all ``None`` for no values)."""

    mean: float | None
    std: float | None
    min: float | None
    max: float | None


class StepSeconds(TypedDict, total=False):
    """How long the step took (``step``), its generation part, and its evaluation."""

    step: float
    generation: float | None
    eval: float


class MetricsLine(TypedDict, total=False):
    """One ``metrics.jsonl`` line (see ``docs/training.md``). :func:`step_metrics` gives the
    rollout part; the trainer adds ``seconds`` and ``trainer``. Every key but ``step`` may
    be missing from a line read back (an older or foreign file)."""

    step: Required[int]
    weights_version: int
    groups: int
    rollouts: int
    reward: float | None
    reward_std: float | None
    rewards: dict[str, float | None]
    advantage: Stats
    zero_variance_group_share: float | None
    termination_reasons: dict[str, int]
    non_trainable_share: float | None
    token_prefix_breaks: int
    token_coverage: float | None
    completion_tokens: Stats
    seconds: StepSeconds
    trainer: dict[str, float | None]


TRAINER_KEYS = {
    "loss": "loss",
    "kl": "kl",
    "entropy": "entropy",
    "grad_norm": "grad_norm",
    "learning_rate": "learning_rate",
    "clip_ratio": "clip_ratio/region_mean",
    "trl_reward": "reward",
    "trl_reward_std": "reward_std",
    "trl_zero_std_share": "frac_reward_zero_std",
}
"""``metrics.jsonl`` ``trainer`` field -> the key of TRL's log record it is read from."""


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _stats(values: Sequence[float]) -> Stats:
    if not values:
        return {"mean": None, "std": None, "min": None, "max": None}
    mean = math.fsum(values) / len(values)
    variance = math.fsum((v - mean) ** 2 for v in values) / len(values)
    return {"mean": mean, "std": math.sqrt(variance), "min": min(values), "max": max(values)}


def _completion_tokens(trajectory: Trajectory) -> int:
    """Tokens the model sampled in the rollout (recorded ids, else the usage count)."""
    calls = trajectory.model_calls
    sampled = [len(c.completion_token_ids) for c in calls if c.completion_token_ids]
    if sampled:
        return sum(sampled)
    usage = trajectory.usage or {}
    count = usage.get("completion_tokens")
    return count if isinstance(count, int) else 0


def step_metrics(
    step: int,
    groups: Sequence[Sequence[Trajectory]],
    reward_weights: Mapping[str, float] | None,
    *,
    weights_version: int,
) -> MetricsLine:
    """The rollout part of step ``step``'s metrics line (see ``docs/training.md``).

    ``reward`` and ``rewards`` average over every rollout (failures count with their zero
    rewards, as the results summary does); advantages are GRPO's ``(r - mean) / std`` over
    each group's trainable rollouts (``group_advantages``), as the trainer sees them.
    """
    rollouts = [t for group in groups for t in group]
    keys = list(dict.fromkeys(key for t in rollouts for key in t.rewards))
    scalars = [scalar_reward(t.rewards, reward_weights) for t in rollouts]
    advantages: list[float] = []
    flat = 0
    for group in groups:
        trainable = [scalar_reward(t.rewards, reward_weights) for t in group if t.trainable]
        if len(trainable) < 2 or min(trainable) == max(trainable):
            flat += 1
        if trainable:
            advantages.extend(group_advantages(trainable, "grpo"))
    lengths = [float(_completion_tokens(t)) for t in rollouts]
    reasons = Counter(t.termination_reason for t in rollouts)
    return {
        "step": step,
        "weights_version": weights_version,
        "groups": len(groups),
        "rollouts": len(rollouts),
        "reward": _mean(scalars),
        "reward_std": _stats(scalars)["std"],
        "rewards": {key: _mean([t.rewards.get(key, 0.0) for t in rollouts]) for key in keys},
        "advantage": _stats(advantages),
        "zero_variance_group_share": flat / len(groups) if groups else None,
        "termination_reasons": dict(sorted(reasons.items())),
        "non_trainable_share": (
            sum(not t.trainable for t in rollouts) / len(rollouts) if rollouts else None
        ),
        "token_prefix_breaks": sum(t.token_prefix_breaks for t in rollouts),
        "token_coverage": _token_coverage(rollouts),
        "completion_tokens": _stats(lengths),
    }


def _token_coverage(rollouts: Sequence[Trajectory]) -> float | None:
    """Sampled tokens of the trainable rollouts that their training samples hold, over
    those sampled (``Trajectory.coverage``); ``None`` when none recorded tokens."""
    sampled = trained = 0
    for trajectory in rollouts:
        coverage = trajectory.coverage if trajectory.trainable else None
        if coverage is not None:
            sampled += coverage.sampled_tokens
            trained += coverage.trained_tokens
    return trained / sampled if sampled else None


def trainer_metrics(logs: Mapping[str, object]) -> dict[str, float | None]:
    """TRL's numbers for the step from its log record (``None`` for what it did not log:
    ``kl`` only with ``beta > 0``)."""
    picked: dict[str, float | None] = {}
    for name, key in TRAINER_KEYS.items():
        value = logs.get(key)
        picked[name] = float(value) if isinstance(value, int | float) else None
    return picked


def tracker_metrics(line: MetricsLine) -> dict[str, float]:
    """A metrics line's rollout numbers as flat ``benchmax/...`` scalars for trackers."""
    flat: dict[str, float] = {}
    for name in ("reward", "zero_variance_group_share", "non_trainable_share", "token_coverage"):
        value = line.get(name)
        if isinstance(value, int | float):
            flat[f"benchmax/{name}"] = float(value)
    for key, value in (line.get("rewards") or {}).items():
        if isinstance(value, int | float):
            flat[f"benchmax/rewards/{key}"] = float(value)
    for reason, count in (line.get("termination_reasons") or {}).items():
        flat[f"benchmax/termination/{reason}"] = float(count)
    parts = (
        ("advantage", line.get("advantage")),
        ("completion_tokens", line.get("completion_tokens")),
    )
    for part, stats in parts:
        for stat, number in (stats or {}).items():
            if isinstance(number, int | float):
                flat[f"benchmax/{part}/{stat}"] = float(number)
    flat["benchmax/token_prefix_breaks"] = float(line.get("token_prefix_breaks") or 0)
    return flat
