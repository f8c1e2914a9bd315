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
from typing import Literal, Required, TypedDict

from benchmax.results._advantages import scalar_reward
from benchmax.trajectory import Trajectory

__all__ = [
    "TRAINER_KEYS",
    "MetricsLine",
    "StepSeconds",
    "Stats",
    "step_metrics",
    "tracker_metrics",
    "trainer_metrics",
    "trl_advantages",
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
    "logprob_gap": "sampling/logprob_gap/mean",
    "is_masked_share": "sampling/is_masked_sequence_share",
    "trl_logprob_gap": "sampling/sampling_logp_difference/mean",
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


type RewardScaling = Literal["group", "batch", "none"]

TRL_STD_EPSILON = 1e-4
"""What TRL's ``GRPOTrainer`` adds to the standard deviation it divides advantages by."""


def _sample_std(values: Sequence[float]) -> float:
    """Bessel-corrected standard deviation (TRL's ``nanstd``); NaN for fewer than 2 values."""
    if len(values) < 2:
        return math.nan
    mean = math.fsum(values) / len(values)
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))


def trl_advantages(
    groups: Sequence[Sequence[float | None]], scale_rewards: RewardScaling = "group"
) -> list[list[float]]:
    """The advantages TRL's ``GRPOTrainer`` trains with (``sum_then_normalize``), per group.

    Each group holds its rollouts' scalar rewards, ``None`` for a non-trainable rollout
    (left out of the group's mean and std, advantage 0). ``r - group mean``, divided by
    the group's (``"group"``) or the whole batch's (``"batch"``) sample standard deviation
    + 1e-4, or not divided (``"none"``: Dr. GRPO, Liu et al. 2025 §3). A group with one
    scored rollout has no sample std: its advantages are 0 unless ``"none"``. Computed in
    float64 (TRL: float32, so they agree to ~1e-6 relative).
    """
    scored = [[r for r in group if r is not None] for group in groups]
    batch_std = _sample_std([r for group in scored for r in group])
    result: list[list[float]] = []
    for group, rewards in zip(groups, scored, strict=True):
        mean = math.fsum(rewards) / len(rewards) if rewards else math.nan
        std = batch_std if scale_rewards == "batch" else _sample_std(rewards)
        row = []
        for reward in group:
            if reward is None:
                row.append(0.0)
                continue
            advantage = reward - mean
            if scale_rewards != "none":
                advantage /= std + TRL_STD_EPSILON
            row.append(0.0 if math.isnan(advantage) else advantage)
        result.append(row)
    return result


def step_metrics(
    step: int,
    groups: Sequence[Sequence[Trajectory]],
    reward_weights: Mapping[str, float] | None,
    *,
    weights_version: int,
    scale_rewards: RewardScaling = "group",
) -> MetricsLine:
    """The rollout part of step ``step``'s metrics line (see ``docs/training.md``).

    ``reward`` and ``rewards`` average over every rollout (failures count with their zero
    rewards, as the results summary does); ``advantage`` summarizes every rollout's
    advantage exactly as TRL trained with it (:func:`trl_advantages` with TRL's
    ``scale_rewards``; a non-trainable rollout's is 0).
    """
    rollouts = [t for group in groups for t in group]
    keys = list(dict.fromkeys(key for t in rollouts for key in t.rewards))
    scalars = [scalar_reward(t.rewards, reward_weights) for t in rollouts]
    flat = 0
    rewards: list[list[float | None]] = []
    for group in groups:
        trainable = [scalar_reward(t.rewards, reward_weights) for t in group if t.trainable]
        if len(trainable) < 2 or min(trainable) == max(trainable):
            flat += 1
        rewards.append(
            [scalar_reward(t.rewards, reward_weights) if t.trainable else None for t in group]
        )
    advantages = [a for row in trl_advantages(rewards, scale_rewards) for a in row]
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
