"""One scalar reward per rollout, and group-relative advantages from a group's scalars."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

from benchmax._value_checks import is_finite_number, is_non_empty_str

__all__ = ["NO_SIGNAL_STD", "AdvantageMethod", "group_advantages", "scalar_reward"]

AdvantageMethod = Literal["grpo", "dr_grpo", "rloo"]


def scalar_reward(
    rewards: Mapping[str, float], weights: Mapping[str, float] | None = None
) -> float:
    """One number for a reward map: ``sum(weights[key] * rewards[key])``.

    ``weights`` is the environment's ``reward_weights``; ``None`` (the default) weighs
    every key 1.0, so the scalar is the sum of the map. Keys of ``rewards`` that
    ``weights`` leaves out count 0. Raises ``ValueError`` when a weighted key is missing
    from ``rewards``, or a weight or reward is not a finite number.
    """
    if weights is None:
        weights = dict.fromkeys(rewards, 1.0)
    total = []
    for key, weight in weights.items():
        if not is_non_empty_str(key) or not is_finite_number(weight):
            raise ValueError(f"reward weight {key!r} must be a finite number, got {weight!r}")
        if key not in rewards:
            raise ValueError(f"reward {key!r} has a weight but is not in the rewards")
        value = rewards[key]
        if not is_finite_number(value):
            raise ValueError(f"reward {key!r} must be a finite number, got {value!r}")
        total.append(float(weight) * float(value))
    return math.fsum(total)


NO_SIGNAL_STD = 1e-9
"""A group whose rewards' population standard deviation is at most ``NO_SIGNAL_STD *
max(1, max |r|)`` has no signal: every method gives it all-zero advantages. Floating-point
rounding (``0.1 + 0.2`` vs ``0.3``: a spread of one unit in the last place, ~1e-16 relative)
stays far below it, so noise never becomes a +-1.7 GRPO advantage; a real difference in
the rewards stays far above it."""


def group_advantages(rewards: Sequence[float], method: AdvantageMethod = "grpo") -> list[float]:
    """One advantage per rollout of a group, from the group's scalar rewards (same order).

    - ``"grpo"`` (default): ``(r - mean) / std`` with the population standard deviation of
      the group. Shao et al. 2024, "DeepSeekMath: Pushing the Limits of Mathematical
      Reasoning in Open Language Models", §4.1.2 (outcome supervision).
    - ``"dr_grpo"``: ``r - mean`` (no division by the standard deviation). Liu et al.
      2025, "Understanding R1-Zero-Like Training: A Critical Perspective", §3.
    - ``"rloo"``: ``r_i - mean of the other rewards`` = ``n / (n - 1) * (r_i - mean)``,
      the leave-one-out baseline; zeros for a group of one. Kool et al. 2019, "Buy 4
      REINFORCE Samples, Get a Baseline for Free!"; Ahmadian et al. 2024, "Back to
      Basics: Revisiting REINFORCE Style Optimization for Learning from Human Feedback
      in LLMs".

    Every method gives all zeros to a group without signal: a standard deviation of at
    most ``1e-9 * max(1, max |r|)`` (equal rewards, or rewards apart by rounding only, as
    ``[0.1 + 0.2, 0.3]``). Raises ``ValueError`` for an empty group, a reward that is not a
    finite number, or an unknown ``method``.
    """
    if method not in ("grpo", "dr_grpo", "rloo"):
        raise ValueError(f"unknown advantage method {method!r} (use 'grpo', 'dr_grpo' or 'rloo')")
    values = [float(value) for value in _checked(rewards)]
    n = len(values)
    # (r - mean) / std does not change when every reward is multiplied by the same positive
    # number: bring the largest magnitude into [0.5, 1) by a power of two first (exact), so
    # subnormal rewards (5e-324) and huge ones (1e308) neither underflow nor overflow. The
    # centering is exact (n * r_i - sum r, one correctly rounded fsum each), so the
    # advantages sum to zero even when the mean itself is not a float.
    largest = max(abs(value) for value in values)
    if largest == 0.0:
        return [0.0] * n
    exponent = math.frexp(largest)[1]
    scaled = [math.ldexp(value, -exponent) for value in values]
    negated = [-value for value in scaled]
    centered = [math.fsum([value] * n + negated) for value in scaled]  # n * (r - mean)
    spread = max(abs(c) for c in centered)
    if spread == 0.0:
        return [0.0] * n
    # n * std in scaled units; std <= max |r| (half the range at most), so it cannot overflow.
    scaled_std = spread * math.sqrt(math.fsum((c / spread) ** 2 for c in centered) / n)
    std = math.ldexp(scaled_std / n, exponent)
    if std <= NO_SIGNAL_STD * max(1.0, largest):
        return [0.0] * n
    if method == "grpo":
        return [c / scaled_std for c in centered]
    mean = math.fsum(values) / n
    deviations = [value - mean for value in values]
    return deviations if method == "dr_grpo" else [n / (n - 1) * d for d in deviations]


def _checked(rewards: Sequence[float]) -> list[float]:
    values = list(rewards)
    if not values:
        raise ValueError("a group needs at least one reward")
    for value in values:
        if not is_finite_number(value):
            raise ValueError(f"rewards must be finite numbers, got {value!r}")
    return values
