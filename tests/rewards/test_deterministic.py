"""Judge-free reward helpers."""

from __future__ import annotations

import difflib
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

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

TRANSCRIPT = [
    {"role": "assistant", "content": "earlier <tool_call>"},
    {"role": "tool", "content": "result"},
    {"role": "assistant", "content": " final answer "},
]


# --- extract_completion_text ---------------------------------------------------------


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        (" answer ", "answer"),
        ("", ""),
        ([], ""),
        (TRANSCRIPT, "final answer"),
        ([*TRANSCRIPT, {"role": "user", "content": "more?"}], ""),
        ([{"role": "assistant", "content": None}], ""),
        ([{"role": "assistant", "content": [{"type": "text", "text": " x"}, "y "]}], "xy"),
        ([{"role": "assistant"}], ""),
        (["not a mapping"], ""),
    ],
)
def test_extract_completion_text(completion: Any, expected: str) -> None:
    assert extract_completion_text(completion) == expected


# --- extract_answer_block and clip01 ----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("prefix <answer>42</answer>", "42"),
        (" 42 ", "42"),
        ("<ANSWER>\n a \n</Answer> <answer>b</answer>", "a"),
        ("<answer>unterminated", "<answer>unterminated"),
        ("", ""),
        (None, ""),
    ],
)
def test_extract_answer_block(text: Any, expected: str) -> None:
    assert extract_answer_block(text) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (-1, 0.0),
        (2, 1.0),
        (0.25, 0.25),
        ("0.5", 0.5),
        (math.nan, 0.0),
        (math.inf, 0.0),
        (-math.inf, 0.0),
        ("abc", 0.0),
        (None, 0.0),
        (True, 1.0),
        (10**400, 0.0),
    ],
)
def test_clip01(value: Any, expected: float) -> None:
    assert clip01(value) == expected


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_clip01_is_always_within_unit_interval(value: float) -> None:
    clipped = clip01(value)
    assert 0.0 <= clipped <= 1.0
    if 0 <= value <= 1:
        assert clipped == value


# --- overlap ------------------------------------------------------------------------------


def test_percent_of_text_a_in_text_b() -> None:
    assert percent_of_text_a_in_text_b("secret reference", "unrelated") == 0.25
    assert percent_of_text_a_in_text_b("", "anything") == 0.0
    assert percent_of_text_a_in_text_b("abc", "abc") == 1.0


@given(st.text(max_size=30), st.text(max_size=30))
def test_percent_matches_difflib_and_is_bounded(a: str, b: str) -> None:
    value = percent_of_text_a_in_text_b(a, b)
    assert 0.0 <= value <= 1.0
    if a:
        blocks = difflib.SequenceMatcher(None, a, b).get_matching_blocks()
        assert value == sum(block.size for block in blocks) / len(a)


def test_overlap_reward_uses_final_answer() -> None:
    assert overlap_reward("secret reference", "secret reference") == 1.0
    transcript = [
        {"role": "assistant", "content": "secret reference"},
        {"role": "tool", "content": "..."},
        {"role": "assistant", "content": "unrelated"},
    ]
    assert overlap_reward(transcript, "secret reference", minimum_overlap=0.9) == 0.0
    assert overlap_reward("unrelated", "secret reference", minimum_overlap=0.25) == 0.25
    assert overlap_reward("unrelated", "secret reference", minimum_overlap=0.3) == 0.0


def test_overlap_reward_reference_chunks_and_empty_reference() -> None:
    chunks = [{"content": "alpha"}, {"content": "beta"}, {"other": 1}]
    # reference "alpha beta " (the content-less chunk adds an empty part)
    assert overlap_reward("alpha beta", "ignored", reference_chunks=chunks) == 10 / 11
    assert overlap_reward("alpha beta", "x", reference_chunks=chunks[:2]) == 1.0
    assert overlap_reward("anything", None) == 0.0
    assert overlap_reward("anything", "") == 0.0


@pytest.mark.parametrize("minimum", [-0.1, 1.5])
def test_overlap_reward_validates_minimum(minimum: float) -> None:
    with pytest.raises(ValueError, match=r"minimum_overlap must be within \[0, 1\]"):
        overlap_reward("a", "a", minimum_overlap=minimum)


# --- search calls ----------------------------------------------------------------------------


def test_count_search_calls_counts_only_assistant_messages() -> None:
    transcript = [
        {"role": "assistant", "content": "<tool_call><tool_call>"},
        {"role": "tool", "content": "<tool_call>"},
        {"role": "user", "content": "<tool_call>"},
        {"role": "assistant", "content": None},
    ]
    assert count_search_calls(transcript) == 2
    assert count_search_calls("<tool_call>x<tool_call>") == 2
    assert count_search_calls("") == 0


def test_search_within_budget() -> None:
    assert search_within_budget(2, 3) is True
    assert search_within_budget(3, 3) is True
    assert search_within_budget(4, 3) is False
    for calls, limit in [(-1, 3), (1, -3)]:
        with pytest.raises(ValueError, match="calls and max_calls must be non-negative"):
            search_within_budget(calls, limit)


# --- citation_score ----------------------------------------------------------------------------


def chunks(*ids: Any, field: str = "source_id") -> list[dict[str, Any]]:
    return [{"content": "c", "metadata": {field: value}} for value in ids]


def test_citation_score_example() -> None:
    result = citation_score("Answer [Source: a] [Source: unknown]", chunks("a", "b"))
    assert result == {"precision": 0.5, "recall": 0.5}
    assert list(result) == ["precision", "recall"]


def test_citation_score_normalization_and_fields() -> None:
    completion = [{"role": "assistant", "content": "[source:  A ] [SOURCE: b]"}]
    references = [
        {"metadata": {"source_id": None, "url": " A "}},
        {"metadata": {"source_id": " ", "url": "b"}},
        {"metadata": "not a mapping"},
        {"no_metadata": True},
    ]
    assert citation_score(completion, references, source_field=["source_id", "url"]) == {
        "precision": 1.0,
        "recall": 1.0,
    }
    lowered = citation_score(
        "[Source: X]", chunks("x"), canonicalize=lambda value: value.strip().lower()
    )
    assert lowered == {"precision": 1.0, "recall": 1.0}


def test_citation_score_first_present_field_wins() -> None:
    references = [{"metadata": {"source_id": "primary", "url": "secondary"}}]
    assert citation_score("[Source: secondary]", references, source_field=("source_id", "url")) == {
        "precision": 0.0,
        "recall": 0.0,
    }


def test_citation_score_empty_sides_and_validation() -> None:
    assert citation_score("no citations", chunks("a")) == {"precision": 0.0, "recall": 0.0}
    assert citation_score("[Source: a]", []) == {"precision": 0.0, "recall": 0.0}
    with pytest.raises(ValueError, match="source_field must contain at least one field"):
        citation_score("[Source: a]", chunks("a"), source_field=[])


# --- tool_call_efficiency ----------------------------------------------------------------

FOUR_CALLS = "<tool_call>" * 4


def test_tool_call_efficiency_decay() -> None:
    value = tool_call_efficiency(
        FOUR_CALLS, correctness=0.5, reference_chunk_count=1, decay_rate=0.2
    )
    assert value == pytest.approx(0.5 * math.exp(-0.2))
    assert tool_call_efficiency("<tool_call>") == 1.0
    assert tool_call_efficiency(FOUR_CALLS, correctness=0) == 0.0
    assert tool_call_efficiency(FOUR_CALLS, max_calls=3) == 0.0
    assert tool_call_efficiency("<tool_call>", correctness=7) == 1.0
    assert tool_call_efficiency(FOUR_CALLS) == pytest.approx(math.exp(-0.4))


def test_tool_call_efficiency_ranges() -> None:
    ranges = [(0, 2, 1.0), (3, 5, 0.4)]
    assert tool_call_efficiency(FOUR_CALLS, ranges=ranges) == 0.4
    assert tool_call_efficiency("<tool_call>" * 9, ranges=ranges) == 0.0
    assert tool_call_efficiency(FOUR_CALLS, ranges=[(4, None, 3.0)]) == 1.0
    # ranges after the first match are not validated
    assert tool_call_efficiency(FOUR_CALLS, ranges=[(0, 9, 0.3), (5, 1, 1.0)]) == 0.3


@pytest.mark.parametrize("bad", [[(-1, 2, 1.0)], [(3, 1, 1.0)], [(0, 1, 1.0), (5, 4, 0.2)]])
def test_tool_call_efficiency_range_validation(bad: list[tuple[int, int, float]]) -> None:
    with pytest.raises(ValueError, match="tool-call ranges must be ordered and non-negative"):
        tool_call_efficiency(FOUR_CALLS, ranges=bad)


@pytest.mark.parametrize(
    "kwargs",
    [{"max_calls": -1}, {"reference_chunk_count": -1}, {"decay_rate": -0.1}],
)
def test_tool_call_efficiency_non_negative(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="non-negative"):
        tool_call_efficiency(FOUR_CALLS, ranges=[(0, None, 1.0)], **kwargs)


@given(
    calls=st.integers(0, 15),
    correctness=st.floats(0, 1),
    decay=st.floats(0, 3),
    chunk_count=st.integers(0, 5),
)
def test_tool_call_efficiency_never_exceeds_correctness(
    calls: int, correctness: float, decay: float, chunk_count: int
) -> None:
    value = tool_call_efficiency(
        "<tool_call>" * calls,
        correctness=correctness,
        reference_chunk_count=chunk_count,
        decay_rate=decay,
    )
    assert 0.0 <= value <= correctness
    if calls <= chunk_count + 2:
        assert value == correctness
