"""Deterministic helpers exactly at their boundaries (issue 9 §6).

Every comparison in ``benchmax.rewards.deterministic`` is pinned on both sides
of its edge: a count exactly at a limit, a range whose minimum equals its
maximum, limits of 0 and 1, so a ``>``/``>=`` (or ``<``/``<=``) flip fails a test.
"""

from __future__ import annotations

import math

import pytest

from benchmax.rewards import (
    citation_score,
    clip01,
    count_search_calls,
    extract_answer_block,
    extract_completion_text,
    overlap_reward,
    percent_of_text_a_in_text_b,
    search_within_budget,
    tool_call_efficiency,
)


def calls(n: int) -> str:
    return "<tool_call>" * n


# --- search_within_budget ------------------------------------------------------------


@pytest.mark.parametrize(
    ("used", "limit", "within"),
    [(0, 0, True), (1, 0, False), (0, 1, True), (1, 1, True), (2, 1, False), (5, 5, True)],
)
def test_search_within_budget_at_the_limit(used: int, limit: int, within: bool) -> None:
    assert search_within_budget(used, limit) is within


@pytest.mark.parametrize(("used", "limit"), [(-1, 0), (0, -1), (-1, -1)])
def test_search_within_budget_refuses_just_below_zero(used: int, limit: int) -> None:
    with pytest.raises(ValueError, match="calls and max_calls must be non-negative"):
        search_within_budget(used, limit)


# --- tool_call_efficiency: validation edges ------------------------------------------------


def test_zero_counts_and_zero_decay_are_valid() -> None:
    assert tool_call_efficiency(calls(0), max_calls=0, reference_chunk_count=0) == 1.0
    assert tool_call_efficiency(calls(5), decay_rate=0) == 1.0  # no decay at all
    assert tool_call_efficiency(calls(3), ranges=[(0, 0, 1.0)], max_calls=0, decay_rate=0) == 0.0


@pytest.mark.parametrize("decay", [math.nan, -1e-12])
def test_decay_rate_below_zero_or_nan_is_refused(decay: float) -> None:
    with pytest.raises(ValueError, match="counts and decay_rate must be non-negative"):
        tool_call_efficiency(calls(1), decay_rate=decay)


def test_infinite_decay_zeroes_any_excess_but_not_an_allowed_count() -> None:
    assert tool_call_efficiency(calls(2), decay_rate=math.inf) == 1.0
    assert tool_call_efficiency(calls(3), decay_rate=math.inf) == 0.0


# --- tool_call_efficiency: decay mode ------------------------------------------------------


@pytest.mark.parametrize(
    ("count", "limit", "expected"),
    [
        (0, 0, 1.0),  # a limit of 0 allows zero calls
        (1, 0, 0.0),
        (1, 1, 1.0),  # exactly at the limit still scores
        (2, 1, 0.0),
        (10, 10, math.exp(-0.2 * 8)),
        (11, 10, 0.0),
    ],
)
def test_decay_at_the_call_limit(count: int, limit: int, expected: float) -> None:
    assert tool_call_efficiency(calls(count), max_calls=limit) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("count", "chunks", "expected"),
    [
        (2, 0, 1.0),  # reference_chunk_count + 2 calls are free
        (3, 0, math.exp(-0.5)),  # the first extra call decays once
        (4, 0, math.exp(-1.0)),
        (3, 1, 1.0),
        (4, 1, math.exp(-0.5)),
        (0, 0, 1.0),
    ],
)
def test_decay_starts_after_reference_chunks_plus_two(
    count: int, chunks: int, expected: float
) -> None:
    value = tool_call_efficiency(
        calls(count), correctness=1.0, reference_chunk_count=chunks, decay_rate=0.5
    )
    assert value == pytest.approx(expected)


@pytest.mark.parametrize(
    ("correctness", "expected"), [(0, 0.0), (1e-9, 1e-9), (1, 1.0), (1.5, 1.0), (-0.1, 0.0)]
)
def test_correctness_edges(correctness: float, expected: float) -> None:
    assert tool_call_efficiency(calls(1), correctness=correctness) == expected


# --- tool_call_efficiency: range mode --------------------------------------------------------


@pytest.mark.parametrize(
    ("count", "expected"),
    [(0, 0.0), (1, 0.0), (2, 0.7), (3, 0.0), (4, 0.2), (5, 0.2), (6, 0.0)],
)
def test_ranges_include_both_ends_and_min_equal_to_max(count: int, expected: float) -> None:
    ranges = [(2, 2, 0.7), (4, 5, 0.2)]
    assert tool_call_efficiency(calls(count), ranges=ranges) == expected


def test_range_starting_at_zero_and_open_ended_range() -> None:
    assert tool_call_efficiency(calls(0), ranges=[(0, 0, 1.0)]) == 1.0
    assert tool_call_efficiency(calls(1), ranges=[(0, 0, 1.0)]) == 0.0
    assert tool_call_efficiency(calls(3), ranges=[(3, None, 0.5)]) == 0.5
    assert tool_call_efficiency(calls(2), ranges=[(3, None, 0.5)]) == 0.0
    assert tool_call_efficiency(calls(0), ranges=[]) == 0.0


@pytest.mark.parametrize("bad", [(-1, 0, 1.0), (-1, None, 1.0), (1, 0, 1.0), (3, 2, 1.0)])
def test_range_just_out_of_order_or_below_zero_is_refused(bad: tuple[int, int, float]) -> None:
    with pytest.raises(ValueError, match="tool-call ranges must be ordered and non-negative"):
        tool_call_efficiency(calls(0), ranges=[bad])


@pytest.mark.parametrize(("score", "expected"), [(0, 0.0), (1, 1.0), (1.01, 1.0), (-0.01, 0.0)])
def test_range_scores_are_clipped_at_0_and_1(score: float, expected: float) -> None:
    assert tool_call_efficiency(calls(1), ranges=[(1, 1, score)]) == expected


# --- overlap ---------------------------------------------------------------------------------


@pytest.mark.parametrize("minimum", [0, 0.0, 1, 1.0])
def test_minimum_overlap_of_0_and_1_are_valid(minimum: float) -> None:
    assert overlap_reward("same text", "same text", minimum_overlap=minimum) == 1.0


@pytest.mark.parametrize("minimum", [-1e-12, 1 + 1e-12, math.nan])
def test_minimum_overlap_just_outside_is_refused(minimum: float) -> None:
    with pytest.raises(ValueError, match=r"minimum_overlap must be within \[0, 1\]"):
        overlap_reward("a", "a", minimum_overlap=minimum)


def test_overlap_exactly_at_the_minimum_is_kept() -> None:
    # "unrelated" covers 4 of the 16 characters of "secret reference": exactly 0.25
    assert overlap_reward("unrelated", "secret reference", minimum_overlap=0.25) == 0.25
    assert overlap_reward("unrelated", "secret reference", minimum_overlap=0.2500001) == 0.0
    assert overlap_reward("zzz", "abc", minimum_overlap=0) == 0.0
    assert overlap_reward("abc", "abc", minimum_overlap=1) == 1.0


def test_percent_of_a_single_character() -> None:
    assert percent_of_text_a_in_text_b("a", "a") == 1.0
    assert percent_of_text_a_in_text_b("a", "b") == 0.0
    assert percent_of_text_a_in_text_b("a", "") == 0.0


# --- clip01 ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0, 0.0), (1, 1.0), (-0.0, 0.0), (1e-300, 1e-300), (math.nextafter(1, 2), 1.0), (0.5, 0.5)],
)
def test_clip01_at_its_edges(value: float, expected: float) -> None:
    assert clip01(value) == expected


# --- counting and citations --------------------------------------------------------------------


def test_counts_of_zero_and_one() -> None:
    assert count_search_calls([]) == 0
    assert count_search_calls([{"role": "assistant", "content": "<tool_call>"}]) == 1
    assert count_search_calls("<tool_call") == 0


def test_citation_with_a_single_source_and_falsy_ids() -> None:
    one = [{"metadata": {"source_id": "a"}}]
    assert citation_score("[Source: a]", one) == {"precision": 1.0, "recall": 1.0}
    assert citation_score("[Source: b]", one) == {"precision": 0.0, "recall": 0.0}
    zero = [{"metadata": {"source_id": 0}}]  # 0 is an id, not "missing"
    assert citation_score("[Source: 0]", zero) == {"precision": 1.0, "recall": 1.0}
    two = [{"metadata": {"source_id": "a"}}, {"metadata": {"source_id": "b"}}]
    assert citation_score("[Source: a]", two) == {"precision": 1.0, "recall": 0.5}
    assert citation_score("[Source: a] [Source: c]", one) == {"precision": 0.5, "recall": 1.0}


def test_single_message_transcripts() -> None:
    assert extract_completion_text([{"role": "assistant", "content": " x "}]) == "x"
    assert extract_completion_text([{"role": "user", "content": "x"}]) == ""
    assert extract_answer_block("<answer></answer>") == ""
    assert extract_answer_block("<answer> </answer>rest") == ""
