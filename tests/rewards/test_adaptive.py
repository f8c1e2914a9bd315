"""Adaptive rubrics: generation, the caller-owned cache and generate-and-cache."""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmax.rewards import (
    AdaptiveRubrics,
    JudgeError,
    Rubric,
    RubricCache,
    generate_adaptive_rubrics,
    generate_and_cache_adaptive_rubrics,
)
from benchmax.rewards.adaptive import prompt_key


def positive(title: str) -> Rubric:
    return Rubric(title, f"{title} description")


def negative(title: str) -> Rubric:
    return Rubric(title, f"{title} description", polarity="negative")


def rubric_items(*titles: str) -> list[dict[str, str]]:
    return [{"title": f" {t} ", "description": f" {t} desc "} for t in titles]


# --- AdaptiveRubrics and prompt_key -------------------------------------------------


def test_adaptive_rubrics_all_is_positive_then_negative() -> None:
    value = AdaptiveRubrics(positive=(positive("a"),), negative=(negative("b"),))
    assert [r.title for r in value.all] == ["a", "b"]
    assert AdaptiveRubrics().all == ()


def test_prompt_key_is_sha256_hex() -> None:
    assert prompt_key("q") == hashlib.sha256(b"q").hexdigest()
    assert prompt_key("é") == hashlib.sha256("é".encode()).hexdigest()


# --- RubricCache ---------------------------------------------------------------------


@pytest.mark.parametrize("limit", [0, -1, True, 1.5, "3"])
def test_cache_limit_must_be_positive_int(limit: Any) -> None:
    with pytest.raises(ValueError, match="max_per_polarity must be positive"):
        RubricCache(max_per_polarity=limit)


def test_cache_keeps_highest_deviation_rubrics_per_polarity() -> None:
    cache = RubricCache(max_per_polarity=2)
    assert cache.max_per_polarity == 2
    assert cache.consider("q", positive("low"), [0.4, 0.5]) is True
    assert cache.consider("q", positive("high"), [0, 1]) is True
    assert cache.consider("q", positive("medium"), (0.2, 0.8)) is True
    assert cache.consider("q", negative("negative"), [0, 1]) is True
    result = cache.get("q")
    assert [r.title for r in result.positive] == ["high", "medium"]
    assert [r.title for r in result.negative] == ["negative"]
    assert cache.consider("q", positive("low"), [0.4, 0.5]) is False  # evicted, still too weak


def test_cache_ties_break_by_title_and_reconsider_replaces() -> None:
    cache = RubricCache(max_per_polarity=2)
    for title in ("b", "c", "a"):
        cache.consider("q", positive(title), [0, 1])
    assert [r.title for r in cache.get("q").positive] == ["a", "b"]
    # re-considering a title replaces its candidate even with a lower deviation;
    # "c" was deleted for good, so it does not come back
    assert cache.consider("q", positive("a"), [0.5, 0.6]) is True
    assert [r.title for r in cache.get("q").positive] == ["b", "a"]
    assert cache.consider("q", positive("d"), [0.0, 0.9]) is True
    assert [r.title for r in cache.get("q").positive] == ["b", "d"]


def test_cache_rejects_flat_scores_and_non_finite() -> None:
    cache = RubricCache()
    assert cache.consider("q", positive("flat"), [1, 1, 1]) is False
    assert cache.consider("q", positive("single"), [1]) is False
    assert cache.consider("q", positive("none"), []) is False
    assert cache.get("q").all == ()
    with pytest.raises(ValueError, match="adaptive rubric scores must be finite"):
        cache.consider("q", positive("r"), [0, math.nan])
    cache.consider("q", positive("kept"), [0, 1])
    assert cache.consider("q", positive("kept"), [1, 1]) is False
    assert [r.title for r in cache.get("q").all] == ["kept"]  # left untouched


def test_cache_get_is_a_snapshot_and_instances_are_isolated() -> None:
    first, second = RubricCache(), RubricCache()
    first.consider("q", positive("a"), [0, 1])
    snapshot = first.get("q")
    first.consider("q", positive("b"), [0, 1])
    assert [r.title for r in snapshot.positive] == ["a"]
    assert [r.title for r in first.get("q").positive] == ["a", "b"]
    assert second.get("q") == AdaptiveRubrics()
    assert first.get("other") == AdaptiveRubrics()


def test_cache_stores_only_hashes() -> None:
    cache = RubricCache()
    cache.consider("secret question", positive("a"), [0, 1])
    assert "secret question" not in repr(vars(cache))


@given(
    candidates=st.lists(
        st.tuples(
            st.sampled_from("abcdefgh"),
            st.lists(st.floats(0, 1, allow_nan=False), min_size=2, max_size=4),
        ),
        max_size=12,
    ),
    limit=st.integers(1, 3),
)
def test_cache_never_exceeds_limit_and_orders_by_deviation(candidates, limit: int) -> None:
    cache = RubricCache(max_per_polarity=limit)
    deviations: dict[str, float] = {}
    for title, scores in candidates:
        before = cache.get("q")
        kept = cache.consider("q", positive(title), scores)
        if len(set(scores)) < 2:
            assert kept is False and cache.get("q") == before
            continue
        deviations[title] = statistics.pstdev(scores)
        assert kept == (title in [r.title for r in cache.get("q").positive])
    retained = cache.get("q").positive
    order = [(-deviations[r.title], r.title) for r in retained]
    assert order == sorted(order)
    assert len(retained) <= limit
    assert len({r.title for r in retained}) == len(retained)


# --- generate_adaptive_rubrics ---------------------------------------------------------


async def test_generation_parses_polarity_and_shows_existing_rubrics(stub_judge, judge) -> None:
    stub_judge.script(
        json.dumps(
            {
                "question": "ignored",
                "positive_rubrics": rubric_items("Specific"),
                "negative_rubrics": rubric_items("Vague", "Wrong"),
            }
        )
    )
    result = await generate_adaptive_rubrics(
        question="What?",
        ground_truth="truth",
        responses=["one", "two"],
        judge=judge,
        existing_rubrics=[Rubric("Existing", "already covered")],
    )
    assert result.positive == (Rubric("Specific", "Specific desc"),)
    assert [(r.title, r.polarity) for r in result.negative] == [
        ("Vague", "negative"),
        ("Wrong", "negative"),
    ]
    prompt = stub_judge.prompts[0]
    assert "Existing Rubrics:\nPositive rubrics:\n- Existing: already covered" in prompt
    assert "Question: What?\nGround Truth: truth\nResponses:\nResponse 1:\none" in prompt


async def test_generation_missing_fields_are_empty(stub_judge, judge, judge_calls) -> None:
    stub_judge.script("{}")
    result = await generate_adaptive_rubrics(
        question="q", ground_truth="", responses=["a"], judge=judge
    )
    assert result == AdaptiveRubrics()
    assert judge_calls == [{"request_id": "adaptive-rubric-generation"}]


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        ({"positive_rubrics": {}}, "judge response field 'positive_rubrics' must be a list"),
        ({"negative_rubrics": "x"}, "field 'negative_rubrics' must be a list"),
        ({"positive_rubrics": ["x"]}, r"judge response positive_rubrics\[0\] must be an object"),
        (
            {"negative_rubrics": [{"title": "t", "description": "d"}, {"description": "d"}]},
            r"negative_rubrics\[1\]\.title must be non-empty",
        ),
        (
            {"positive_rubrics": [{"title": "t", "description": " "}]},
            r"positive_rubrics\[0\]\.description must be non-empty",
        ),
        (
            {"positive_rubrics": 1, "negative_rubrics": 2},
            "positive_rubrics",  # positive is parsed first
        ),
    ],
)
async def test_generation_errors_are_judge_errors(
    stub_judge, judge, payload: dict[str, Any], fragment: str
) -> None:
    stub_judge.script(json.dumps(payload))
    with pytest.raises(JudgeError, match=fragment) as raised:
        await generate_adaptive_rubrics(question="q", ground_truth="", responses=["a"], judge=judge)
    assert str(raised.value).startswith("adaptive rubric generation failed: ")


async def test_generation_judge_error_propagates_unchanged(stub_judge, judge) -> None:
    stub_judge.script("no json")
    with pytest.raises(JudgeError, match=r"^judge request failed"):
        await generate_adaptive_rubrics(question="q", ground_truth="", responses=["a"], judge=judge)


# --- generate_and_cache_adaptive_rubrics -------------------------------------------------


async def test_only_discriminative_rubrics_are_retained(stub_judge, judge) -> None:
    cache = RubricCache()
    stub_judge.script(
        json.dumps({"positive_rubrics": rubric_items("Specific", "Flat")}),
    )
    stub_judge.script_scores(0, 1, 1, 1)
    result = await generate_and_cache_adaptive_rubrics(
        question="q", ground_truth="gt", responses=["one", "two"], judge=judge, cache=cache
    )
    assert [r.title for r in result.positive] == ["Specific"]
    assert result == cache.get("q")
    # evaluations ran one rubric at a time, each over every response in order
    prompts = stub_judge.prompts[1:]
    assert ["Specific" in p for p in prompts] == [True, True, False, False]
    assert ["grade:\none" in p for p in prompts] == [True, False, True, False]


async def test_fewer_than_two_nonempty_responses_make_no_call(stub_judge, judge) -> None:
    cache = RubricCache()
    result = await generate_and_cache_adaptive_rubrics(
        question="q", ground_truth="", responses=["", "one", "  "], judge=judge, cache=cache
    )
    assert result == AdaptiveRubrics()
    assert stub_judge.requests == []
    cache.consider("q", positive("kept"), [0, 1])
    again = await generate_and_cache_adaptive_rubrics(
        question="q", ground_truth="", responses=["one"], judge=judge, cache=cache
    )
    assert [r.title for r in again.all] == ["kept"]


async def test_generator_sees_merged_existing_and_cached_rubrics(stub_judge, judge) -> None:
    cache = RubricCache()
    cache.consider("q", Rubric("Shared", "from cache"), [0, 1])
    cache.consider("q", negative("Cached flaw"), [0, 1])
    stub_judge.script("{}")
    await generate_and_cache_adaptive_rubrics(
        question="q",
        ground_truth="",
        responses=[" one ", "two"],
        judge=judge,
        cache=cache,
        existing_rubrics=[Rubric("Shared", "from caller"), Rubric("Own", "mine")],
    )
    prompt = stub_judge.prompts[0]
    assert (
        "Existing Rubrics:\nPositive rubrics:\n- Shared: from cache\n- Own: mine\n"
        "Negative rubrics:\n- Cached flaw: Cached flaw description"
    ) in prompt
    assert "Response 1:\none\n" in prompt  # responses shown stripped


async def test_caching_evaluations_receive_unstripped_responses(stub_judge, judge) -> None:
    stub_judge.script(json.dumps({"negative_rubrics": rubric_items("Rambling")}))
    stub_judge.script_scores(1, 0)
    cache = RubricCache()
    result = await generate_and_cache_adaptive_rubrics(
        question="q",
        ground_truth="",
        responses=["  padded  ", "", "plain"],
        judge=judge,
        cache=cache,
    )
    assert [r.title for r in result.negative] == ["Rambling"]
    assert "\n  padded  " in stub_judge.prompts[1]
    assert len(stub_judge.requests) == 3
