"""Ranking arithmetic: tied positions, anchor seams and the three score scales."""

from __future__ import annotations

import itertools
import json
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmax.rewards import RankingAnchor, Rubric, evaluate_rubric_ranking
from benchmax.rewards._ranking import (
    anchored_score,
    monotone_seams,
    parse_ranking,
    reference_score,
    relative_score,
    tier_positions,
)


def test_tied_positions_are_midpoints() -> None:
    assert tier_positions([[3], [1, 2], [0]]) == {3: 0.0, 1: 1.5, 2: 1.5, 0: 3.0}


@pytest.mark.parametrize(
    ("pairs", "expected"),
    [
        ([(1, 0.4), (2, 0.7)], [(1, 0.7)]),
        ([(0, 0.9), (1.5, 0.2), (2, 0.5)], [(0, 0.9), (1.5, 0.5)]),
        ([(2, 0.4), (0, 0.7)], [(0, 0.7), (2, 0.4)]),
        ([], []),
    ],
)
def test_monotone_seams(pairs, expected) -> None:
    assert monotone_seams(pairs) == expected


def test_seam_band_example() -> None:
    seams = [(1, 0.8), (3, 0.3)]
    got = [anchored_score(p, seams, 5.0) for p in (0, 0.5, 1, 2, 3, 4, 5)]
    assert got == pytest.approx([1.0, 0.9, 0.8, 0.55, 0.3, 0.15, 0.0])


def test_seam_edge_cases() -> None:
    assert anchored_score(0, [(0, 0.6)], 2.0) == 0.6  # best seam at the top
    assert anchored_score(3, [(1, 0.6), (3, 0.2)], 3.0) == 0.2 * 0  # worst seam last: span 0
    assert anchored_score(2, [(2, 0.6), (2, 0.4)], 4.0) == 0.6  # p <= best seam wins


def test_ground_truth_scale_example() -> None:
    got = [reference_score(p, 2, 4, 0.3) for p in (0, 1, 2, 3, 4)]
    assert got == pytest.approx([1.0, 0.75, 0.5, 0.15, 0.0])
    assert reference_score(0, 0, 2, 0.3) == 0.5  # tied with a top reference
    assert reference_score(2, 1, 1, 0.3) == 0.3  # no span below the reference


def test_relative_scale() -> None:
    assert relative_score(0, 0) == 1.0
    assert [relative_score(p, 4) for p in (0, 1, 4)] == [1.0, 0.75, 0.0]


tier_lists = st.integers(min_value=1, max_value=9).flatmap(
    lambda n: st.permutations(range(n)).flatmap(
        lambda order: st.lists(st.booleans(), min_size=n - 1, max_size=n - 1).map(
            lambda cuts: _split(list(order), cuts)
        )
    )
)


def _split(order: list[int], cuts: list[bool]) -> list[list[int]]:
    tiers = [[order[0]]]
    for index, cut in zip(order[1:], cuts, strict=True):
        if cut:
            tiers.append([index])
        else:
            tiers[-1].append(index)
    return tiers


@given(tiers=tier_lists)
def test_parse_and_positions_invariants(tiers: list[list[int]]) -> None:
    count = sum(len(tier) for tier in tiers)
    parsed = parse_ranking(tiers, count)
    assert parsed == tuple(tuple(tier) for tier in tiers)
    positions = tier_positions(parsed)
    assert sorted(positions) == list(range(count))
    # positions sum to the sum of ranks, ties share one value, earlier tiers are better
    assert sum(positions.values()) == pytest.approx(count * (count - 1) / 2)
    for better, worse in itertools.pairwise(parsed):
        assert positions[better[0]] < positions[worse[0]]
        assert len({positions[i] for i in better}) == 1
    assert all(0 <= p <= count - 1 for p in positions.values())


@given(
    tiers=tier_lists,
    anchor_scores=st.lists(st.floats(0, 1), min_size=1, max_size=3).map(sorted),
)
def test_anchored_scores_are_monotone_and_bounded(
    tiers: list[list[int]], anchor_scores: list[float]
) -> None:
    count = sum(len(tier) for tier in tiers)
    if count <= len(anchor_scores):
        return
    positions = tier_positions(tiers)
    max_position = float(count - 1)
    anchor_indices = range(count - len(anchor_scores), count)
    seams = monotone_seams(
        [(positions[i], s) for i, s in zip(anchor_indices, anchor_scores, strict=True)]
    )
    assert all(left[1] >= right[1] for left, right in itertools.pairwise(seams))
    values = sorted((p, anchored_score(p, seams, max_position)) for p in set(positions.values()))
    scores = [v for _, v in values]
    assert all(-1e-9 <= v <= 1 + 1e-9 for v in scores)
    assert all(a >= b - 1e-9 for a, b in itertools.pairwise(scores))


@given(
    count=st.integers(2, 8),
    reference=st.integers(0, 7),
    ceiling=st.floats(0, 1),
)
def test_reference_scale_is_monotone_and_split_at_the_reference(
    count: int, reference: int, ceiling: float
) -> None:
    reference = min(reference, count - 1)
    max_position = float(count - 1)
    scores = [reference_score(p, reference, max_position, ceiling) for p in range(count)]
    above, below = scores[: reference + 1], scores[reference + 1 :]
    assert all(a >= b for a, b in itertools.pairwise(above))
    assert all(a >= b for a, b in itertools.pairwise(below))
    if ceiling <= 0.5:
        assert all(a >= b for a, b in itertools.pairwise(scores))
    assert all(s >= 0.5 for s in above)
    assert all(s <= ceiling for s in scores[reference + 1 :])
    assert scores[reference] == 0.5


@given(seed=st.integers(0, 10_000), size=st.integers(2, 6))
async def test_group_ranking_scores_follow_the_judge_order(seed: int, size: int) -> None:
    """Whatever strict order the judge gives, plain ranking scores follow it linearly."""
    order = list(range(size))
    random.Random(seed).shuffle(order)

    class OrderedJudge:
        async def request_json(self, prompt: str, **kwargs):
            return {"ranking": [[i] for i in order]}, json.dumps({"ranking": order})

    result = await evaluate_rubric_ranking(
        Rubric("q", "d"),
        question="q",
        responses=[f"r{i}" for i in range(size)],
        judge=OrderedJudge(),  # type: ignore[arg-type]
        log_result=False,
    )
    for rank_index, response_index in enumerate(order):
        assert result.scores[response_index] == pytest.approx(1 - rank_index / (size - 1))


async def test_equal_anchor_scores_are_accepted() -> None:
    class TopJudge:
        async def request_json(self, prompt: str, **kwargs):
            return {"ranking": [[0], [1, 2]]}, "raw"

    result = await evaluate_rubric_ranking(
        Rubric("q", "d"),
        question="q",
        responses=["only"],
        judge=TopJudge(),  # type: ignore[arg-type]
        anchors=[RankingAnchor("a", 0.2), RankingAnchor("b", 0.2)],
        log_result=False,
    )
    assert result.scores == (1.0,)  # above every anchor: linear from 0.2 up to 1.0 at 0
