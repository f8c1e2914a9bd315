"""Group metrics for binary rewards: pass@1, pass@k and the share of groups with a success."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["PassAtK", "is_binary", "pass_at_k", "pass_at_k_metrics", "pass_at_k_of_counts"]


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of pass@k from ``n`` samples of which ``c`` passed.

    ``1 - C(n - c, k) / C(n, k)``: the probability that at least one of ``k``
    samples drawn without replacement from the ``n`` passes (Chen et al. 2021,
    "Evaluating Large Language Models Trained on Code", eq. 1). Computed as a
    running product so it stays exact for large ``n``.

    Raises ``ValueError`` unless ``0 <= c <= n`` and ``1 <= k <= n``.
    """
    if not (0 <= c <= n) or not (1 <= k <= n):
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    failure = 1.0
    for i in range(n - c + 1, n + 1):
        failure *= 1.0 - k / i
    return 1.0 - failure


def is_binary(values: Iterable[float]) -> bool:
    """Whether every value is exactly 0 or 1 (a pass/fail reward)."""
    return all(value in (0, 1) for value in values)


@dataclass(frozen=True, slots=True)
class PassAtK:
    """pass@1, pass@k and the share of groups with at least one success, for one reward key.

    ``k`` is the smallest group size (pass@k is only defined for ``k <= n`` in
    every group); values are means over groups.
    """

    k: int
    pass_at_1: float
    pass_at_k: float
    any_success_share: float


def pass_at_k_metrics(groups: Sequence[Sequence[float]]) -> PassAtK | None:
    """Group metrics of one binary reward key; ``None`` when there are no groups
    or a value is not 0 or 1.

    ``groups`` holds each group's values of the key (one value per rollout).
    """
    if not groups or any(not group for group in groups):
        return None
    if not all(is_binary(group) for group in groups):
        return None
    return pass_at_k_of_counts([(len(group), sum(1 for v in group if v == 1)) for group in groups])


def pass_at_k_of_counts(counts: Sequence[tuple[int, int]]) -> PassAtK | None:
    """``pass_at_k_metrics`` from each group's ``(n, c)``: its rollouts and its successes
    (``None`` for no groups). k is the smallest ``n``. Raises ``ValueError`` unless
    ``0 <= c <= n`` and ``n >= 1`` for every group."""
    if not counts:
        return None
    k = min(n for n, _c in counts)
    at_1 = at_k = any_success = 0.0
    for n, c in counts:
        at_1 += pass_at_k(n, c, 1)
        at_k += pass_at_k(n, c, k)
        any_success += c > 0
    count = len(counts)
    return PassAtK(
        k=k,
        pass_at_1=at_1 / count,
        pass_at_k=at_k / count,
        any_success_share=any_success / count,
    )
