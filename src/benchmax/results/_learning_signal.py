"""What a trainer would see of a group: each rollout's weighted scalar reward and its
group-relative advantage, as a trainer computes them.

The scalar is ``scalar_reward(rewards, reward_weights)`` (the sum when
the environment sets no weights); a rollout whose rewards miss a weighted key has none.
Advantages are GRPO's ``(r - mean) / std`` over the group's *scored* rollouts (those with a
trainable termination reason, ``TRAINABLE_REASONS``), as ``TrajectoryGroup.advantages``
does: an operational failure gets 0 and does not move the baseline.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from benchmax._vocabulary import TRAINABLE_REASONS
from benchmax.results._advantages import group_advantages, scalar_reward

__all__ = ["group_signal", "is_scored", "scalar_of"]


def is_scored(termination_reason: str) -> bool:
    """Whether a rollout's rewards judge the model (a trainable termination reason), not
    an operational failure's zeros."""
    return termination_reason in TRAINABLE_REASONS


def scalar_of(rewards: Mapping[str, float], weights: Mapping[str, float] | None) -> float | None:
    """The weighted scalar of one reward map, ``None`` when it has none (a weighted key
    missing, a value that is not a finite number)."""
    try:
        return scalar_reward(rewards, weights)
    except (ValueError, TypeError):
        return None


def group_signal(scalars: Sequence[float | None], reasons: Sequence[str]) -> list[float | None]:
    """One GRPO advantage per rollout of a group (``None`` for a rollout without a
    scalar), over the scored rollouts; 0.0 for the others."""
    kept: list[tuple[int, float]] = [
        (i, scalar)
        for i, (scalar, reason) in enumerate(zip(scalars, reasons, strict=True))
        if scalar is not None and math.isfinite(scalar) and is_scored(reason)
    ]
    advantages: list[float | None] = [None if scalar is None else 0.0 for scalar in scalars]
    if kept:
        values = group_advantages([scalar for _, scalar in kept])
        for (i, _), value in zip(kept, values, strict=True):
            advantages[i] = value
    return advantages
