"""group_advantages (GRPO, Dr. GRPO, RLOO) and scalar_reward."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmax.training import group_advantages, scalar_reward


def _no_signal(rewards: list[float]) -> bool:
    """The documented rule: population std at most 1e-9 * max(1, max |r|)."""
    mean = math.fsum(rewards) / len(rewards)
    std = math.sqrt(math.fsum((r - mean) ** 2 for r in rewards) / len(rewards))
    return std <= 1e-9 * max(1.0, max(abs(r) for r in rewards))


def test_grpo_normalizes_by_the_group_std() -> None:
    advantages = group_advantages([1.0, 0.0, 0.0, 1.0])
    assert advantages == [1.0, -1.0, -1.0, 1.0]  # mean 0.5, population std 0.5
    assert group_advantages([3.0, 1.0], method="grpo") == [1.0, -1.0]


def test_a_group_without_variance_has_zero_advantages() -> None:
    for method in ("grpo", "dr_grpo", "rloo"):
        assert group_advantages([0.1, 0.1, 0.1], method=method) == [0.0, 0.0, 0.0]
        assert group_advantages([1.0], method=method) == [0.0]


def test_dr_grpo_only_centers() -> None:
    assert group_advantages([2.0, 0.0, 1.0], method="dr_grpo") == [1.0, -1.0, 0.0]


@given(st.lists(st.floats(-100, 100), min_size=2, max_size=16))
def test_rloo_is_the_reward_minus_the_mean_of_the_others(rewards: list[float]) -> None:
    advantages = group_advantages(rewards, method="rloo")
    for i, advantage in enumerate(advantages):
        others = rewards[:i] + rewards[i + 1 :]
        expected = 0.0 if _no_signal(rewards) else rewards[i] - sum(others) / len(others)
        assert math.isclose(advantage, expected, rel_tol=1e-9, abs_tol=1e-9)


@given(st.lists(st.floats(-100, 100), min_size=2, max_size=16))
def test_grpo_advantages_have_zero_mean_and_unit_std(rewards: list[float]) -> None:
    advantages = group_advantages(rewards)
    if _no_signal(rewards):
        assert set(advantages) == {0.0}
        return
    n = len(advantages)
    assert abs(math.fsum(advantages) / n) < 1e-6
    assert math.isclose(math.sqrt(math.fsum(a * a for a in advantages) / n), 1.0, rel_tol=1e-6)


@pytest.mark.parametrize(
    ("rewards", "method", "message"),
    [
        ([], "grpo", "at least one reward"),
        ([1.0, float("nan")], "grpo", "finite"),
        ([1.0, True], "grpo", "finite"),
        ([1.0], "ppo", "unknown advantage method"),
    ],
)
def test_bad_groups_are_refused(rewards: list[float], method: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        group_advantages(rewards, method=method)  # type: ignore[arg-type]


def test_the_scalar_reward_is_a_weighted_sum_defaulting_to_the_sum() -> None:
    rewards = {"correct": 1.0, "format": 0.5}
    assert scalar_reward(rewards) == 1.5
    assert scalar_reward(rewards, {"correct": 1.0}) == 1.0
    assert scalar_reward(rewards, {"correct": 2.0, "format": -1.0}) == 1.5
    with pytest.raises(ValueError, match="'style' has a weight but is not in the rewards"):
        scalar_reward(rewards, {"style": 1.0})
    with pytest.raises(ValueError, match="finite"):
        scalar_reward(rewards, {"correct": float("inf")})


def test_grpo_advantages_of_extreme_rewards_are_exact() -> None:
    # Huge rewards neither overflow nor leave the advantages off zero mean.
    assert group_advantages([1e308, -1e308]) == [1.0, -1.0]
    assert group_advantages([1.7e308, 1.7e308, -1.7e308, -1.7e308]) == [1.0, 1.0, -1.0, -1.0]
    assert group_advantages([3.0, 1.0]) == [1.0, -1.0]
    assert group_advantages([1e-3, 0.0]) == [1.0, -1.0]  # small, but a real difference


@pytest.mark.parametrize("method", ["grpo", "dr_grpo", "rloo"])
def test_rounding_noise_is_no_signal(method: str) -> None:
    # 0.1 + 0.2 is 0.30000000000000004: one ulp of spread is not a reason to push the
    # policy (GRPO would make it +-1.7).
    for rewards in (
        [0.1 + 0.2, 0.3, 0.3, 0.3],
        [1.0, 1.0 + 2**-52],
        [0.0, 5e-324],
        [1e12, 1e12 + 1e-4],  # relative to the rewards' size
        [0.0, 0.0, 1e-10],
    ):
        assert group_advantages(rewards, method=method) == [0.0] * len(rewards)  # type: ignore[arg-type]
    assert group_advantages([1e12, 1e12 + 1e4], method=method) != [0.0, 0.0]  # type: ignore[arg-type]
