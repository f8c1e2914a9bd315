"""Ranking arithmetic: tier parsing, tied positions and the three score scales.

Positions are 0-based and lower is better; a tier of ``k`` tied items spanning
ranks ``offset .. offset + k - 1`` puts each of them at the midpoint.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

__all__ = [
    "anchored_score",
    "monotone_seams",
    "parse_ranking",
    "reference_score",
    "relative_score",
    "tier_positions",
]

type Seam = tuple[float, float]
"""``(position, score edge)`` of an anchor on the judge's ranking."""


def parse_ranking(value: object, count: int) -> tuple[tuple[int, ...], ...]:
    """Validate the judge's best-first tiers over indices ``0..count-1``."""
    if not isinstance(value, list) or not value:
        raise ValueError("judge response must contain a non-empty ranking")
    seen: set[int] = set()
    tiers: list[tuple[int, ...]] = []
    for tier in value:
        if not isinstance(tier, list) or not tier:
            raise ValueError("judge ranking tiers must be non-empty lists")
        for index in tier:
            if not isinstance(index, int) or isinstance(index, bool):
                raise ValueError("judge ranking indices must be integers")
            if not 0 <= index < count:
                raise ValueError(f"judge ranking index {index} is outside 0..{count - 1}")
            if index in seen:
                raise ValueError(f"judge ranking repeated response index {index}")
            seen.add(index)
        tiers.append(tuple(tier))
    missing = sorted(set(range(count)) - seen)
    if missing:
        raise ValueError(f"judge ranking omitted response indices: {missing}")
    return tuple(tiers)


def tier_positions(tiers: Sequence[Sequence[int]]) -> dict[int, float]:
    """Each index's position: the midpoint of the ranks its tier spans."""
    positions: dict[int, float] = {}
    offset = 0
    for tier in tiers:
        midpoint = offset + (len(tier) - 1) / 2
        for index in tier:
            positions[index] = midpoint
        offset += len(tier)
    return positions


def monotone_seams(pairs: Sequence[Seam]) -> list[Seam]:
    """Sort anchor ``(position, score)`` pairs and merge them into non-increasing edges.

    An anchor ranked below a worse-scored anchor is merged with it at the
    better position and the higher score, so scores never rise with position.
    """
    seams: list[Seam] = []
    for position, edge in sorted(pairs):
        while seams and edge > seams[-1][1]:
            popped_position, popped_edge = seams.pop()
            position = popped_position
            edge = max(popped_edge, edge)
        seams.append((position, edge))
    return seams


def anchored_score(position: float, seams: Sequence[Seam], max_position: float) -> float:
    """Absolute score interpolated between anchor seams (1.0 at the top, 0.0 at the bottom)."""
    best_position, best_edge = seams[0]
    worst_position, worst_edge = seams[-1]
    if position <= best_position:
        if best_position == 0:
            return best_edge
        return best_edge + (1 - best_edge) * ((best_position - position) / best_position)
    if position >= worst_position:
        span = max_position - worst_position
        return worst_edge * ((max_position - position) / span) if span > 0 else 0.0
    for (left_position, left_edge), (right_position, right_edge) in itertools.pairwise(seams):
        if left_position <= position <= right_position:
            span = right_position - left_position
            if span == 0:
                return max(left_edge, right_edge)
            return right_edge + (left_edge - right_edge) * ((right_position - position) / span)
    raise RuntimeError("position did not fall within anchor seams")


def reference_score(
    position: float, reference_position: float, max_position: float, ceiling: float
) -> float:
    """Score relative to a ranked ground truth: above it 0.5..1.0, below it ``ceiling``..0.0."""
    if position < reference_position:
        if reference_position == 0:
            return 0.5
        return 0.5 + 0.5 * ((reference_position - position) / reference_position)
    if position == reference_position:
        return 0.5
    span = max_position - reference_position
    if span <= 0:
        return ceiling
    return ceiling * (1 - (position - reference_position) / span)


def relative_score(position: float, max_position: float) -> float:
    """Plain relative score: 1.0 for the best position down to 0.0 for the last."""
    return 1.0 - position / max_position if max_position > 0 else 1.0
