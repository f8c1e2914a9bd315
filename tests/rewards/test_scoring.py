"""Reward maps: reward keys, per-rollout scoring, group scoring and group ranking."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmax.rewards import (
    JudgeError,
    Rubric,
    RubricCache,
    rank_group_rubrics,
    rubric_reward_key,
    score_group_rubrics,
    score_rubrics,
)

QUALITY = Rubric("quality", "Good answer.")
HALLUCINATION = Rubric("hallucination", "Makes things up.", polarity="negative")


def generation(positive: list[str] = (), negative: list[str] = ()) -> str:  # type: ignore[assignment]
    return json.dumps(
        {
            "question": "q",
            "positive_rubrics": [{"title": t, "description": f"{t} desc"} for t in positive],
            "negative_rubrics": [{"title": t, "description": f"{t} desc"} for t in negative],
        }
    )


# --- rubric_reward_key -----------------------------------------------------------


@pytest.mark.parametrize(
    ("title", "key"),
    [
        ("Clear & correct", "rubric_clear_correct"),
        ("quality", "rubric_quality"),
        ("A-B", "rubric_a_b"),
        ("A B", "rubric_a_b"),
        ("  --Tone!! ", "rubric_tone"),
        ("Café olé", "rubric_caf_ol"),
        ("Step 2", "rubric_step_2"),
    ],
)
def test_rubric_reward_key(title: str, key: str) -> None:
    assert rubric_reward_key(Rubric(title, "d")) == key


@pytest.mark.parametrize("title", ["!!!", "é", "-- --"])
def test_rubric_reward_key_needs_a_letter_or_digit(title: str) -> None:
    with pytest.raises(ValueError, match="rubric title must contain at least one letter or digit"):
        rubric_reward_key(Rubric(title, "d"))


@given(st.text(min_size=1).filter(str.strip))
def test_rubric_reward_key_shape(title: str) -> None:
    try:
        key = rubric_reward_key(Rubric(title, "d"))
    except ValueError as error:
        assert "letter or digit" in str(error)
        return
    slug = key.removeprefix("rubric_")
    assert key.startswith("rubric_") and slug
    assert set(slug) <= set("abcdefghijklmnopqrstuvwxyz0123456789_")
    assert not slug.startswith("_") and not slug.endswith("_") and "__" not in slug


# --- score_rubrics ------------------------------------------------------------------


async def test_score_rubrics_normalizes_polarity(stub_judge, judge) -> None:
    stub_judge.script_scores(1, 1)
    rewards = await score_rubrics(
        "r1",
        "answer",
        ground_truth=42,
        rubrics=[QUALITY, HALLUCINATION],
        question="q",
        judge=judge,
    )
    assert rewards == {"rubric_quality": 1.0, "rubric_hallucination": 0.0}
    assert list(rewards) == ["rubric_quality", "rubric_hallucination"]
    assert all("42" in prompt for prompt in stub_judge.prompts)
    assert "quality" in stub_judge.prompts[0] and "hallucination" in stub_judge.prompts[1]


async def test_score_rubrics_uses_the_final_assistant_message(stub_judge, judge) -> None:
    stub_judge.script_scores(0)
    transcript = [
        {"role": "assistant", "content": "earlier <tool_call>"},
        {"role": "tool", "content": "result"},
        {"role": "assistant", "content": " final answer "},
    ]
    rewards = await score_rubrics(
        "r1", transcript, ground_truth=None, rubrics=[QUALITY], question="q", judge=judge
    )
    assert rewards == {"rubric_quality": 0.0}
    assert "final answer" in stub_judge.prompts[0]
    assert "earlier" not in stub_judge.prompts[0]
    assert "Reference" not in stub_judge.prompts[0]


@pytest.mark.parametrize("completion", ["", "   ", [], [{"role": "user", "content": "hi"}]])
async def test_empty_completion_scores_zero_without_judge(
    stub_judge, judge, completion: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="benchmax.rewards.scoring"):
        rewards = await score_rubrics(
            "r1",
            completion,
            ground_truth="x",
            rubrics=[QUALITY, HALLUCINATION],
            question="q",
            judge=judge,
        )
    assert rewards == {"rubric_quality": 0.0, "rubric_hallucination": 0.0}
    assert stub_judge.requests == []
    assert "rubric.scored rollout_id=r1 empty_completion=true" in caplog.text


@pytest.mark.parametrize(
    ("rubrics", "rollout_id", "fragment"),
    [
        ([], "r1", "at least one rubric is required"),
        ([QUALITY, Rubric("Quality!", "d")], "r1", "unique reward keys"),
        ([Rubric("???", "d")], "r1", "letter or digit"),
        ([QUALITY], "", "rollout_id must be non-empty"),
        ([QUALITY], None, "rollout_id must be non-empty"),
        ([], "", "at least one rubric is required"),  # rubric checks come first
    ],
)
async def test_score_rubrics_validation(
    stub_judge, judge, rubrics: list[Rubric], rollout_id: Any, fragment: str
) -> None:
    with pytest.raises(ValueError, match=fragment):
        await score_rubrics(
            rollout_id, "answer", ground_truth=None, rubrics=rubrics, question="q", judge=judge
        )
    assert stub_judge.requests == []


async def test_score_rubrics_propagates_judge_errors(stub_judge, judge) -> None:
    stub_judge.script('{"score": 1}', '{"score": 0.5}')
    with pytest.raises(JudgeError, match="not one of"):
        await score_rubrics(
            "r1",
            "answer",
            ground_truth=None,
            rubrics=[QUALITY, HALLUCINATION],
            question="q",
            judge=judge,
        )


# --- score_group_rubrics ---------------------------------------------------------------


async def test_static_group_scoring_keeps_empty_siblings_shape(stub_judge, judge) -> None:
    stub_judge.script_scores(1)
    rewards = await score_group_rubrics(
        ["r1", "r2"],
        ["answer", ""],
        ground_truth="gt",
        question="q",
        judge=judge,
        rubrics=[QUALITY],
    )
    assert rewards == [{"rubric_quality": 1.0}, {"rubric_quality": 0.0}]
    assert len(stub_judge.requests) == 1


async def test_static_group_scoring_order_is_index_major(stub_judge, judge) -> None:
    stub_judge.script_scores(1, 0, 0, 1)
    rewards = await score_group_rubrics(
        ["a", "b"],
        ["first", "second"],
        ground_truth=None,
        question="q",
        judge=judge,
        rubrics=[QUALITY, HALLUCINATION],
    )
    assert rewards == [
        {"rubric_quality": 1.0, "rubric_hallucination": 1.0},
        {"rubric_quality": 0.0, "rubric_hallucination": 0.0},
    ]
    prompts = stub_judge.prompts
    assert "first" in prompts[0] and "quality" in prompts[0]
    assert "first" in prompts[1] and "hallucination" in prompts[1]
    assert "second" in prompts[2] and "second" in prompts[3]


@pytest.mark.parametrize(
    ("ids", "completions", "rubrics", "adaptive", "fragment"),
    [
        (["r1"], ["a", "b"], [QUALITY], False, "rollout_ids and completions must have the same"),
        ([], [], [QUALITY], False, "rollout group must be non-empty"),
        (["r1", ""], ["a", "b"], [QUALITY], False, "rollout_ids must be non-empty strings"),
        (["r1", 3], ["a", "b"], [QUALITY], False, "rollout_ids must be non-empty strings"),
        (["r1", "r1"], ["a", "b"], [QUALITY], False, "rollout_ids must be unique"),
        (["r1"], ["a"], [], False, "at least one rubric is required"),
        (["r1"], ["a"], [QUALITY, Rubric("QUALITY", "d")], False, "unique reward keys"),
        (["r1"], ["a", "b"], [], True, "same length"),
        (["r1"], ["a", "b"], [], False, "same length"),  # group checks before rubric checks
        ([], [], [], False, "rollout group must be non-empty"),
        (["r1", "r1"], ["a", "b"], [Rubric("!", "d")], False, "rollout_ids must be unique"),
    ],
)
async def test_group_validation(
    stub_judge, judge, ids, completions, rubrics, adaptive: bool, fragment: str
) -> None:
    with pytest.raises(ValueError, match=fragment):
        await score_group_rubrics(
            ids,
            completions,
            ground_truth=None,
            question="q",
            judge=judge,
            rubrics=rubrics,
            use_adaptive=adaptive,
        )
    with pytest.raises(ValueError, match=fragment):
        await rank_group_rubrics(
            ids,
            completions,
            ground_truth=None,
            question="q",
            judge=judge,
            rubrics=rubrics,
        )
    assert stub_judge.requests == []


async def test_adaptive_group_scoring_means_normalized_adaptive_rewards(stub_judge, judge) -> None:
    stub_judge.script(generation(positive=["Specific"]))
    stub_judge.script_scores(0, 1)  # caching evaluations: varied, so retained
    stub_judge.script_scores(0, 1)  # final evaluations
    rewards = await score_group_rubrics(
        ["r1", "r2"],
        ["bad", "good"],
        ground_truth=None,
        question="q",
        judge=judge,
        use_adaptive=True,
    )
    assert rewards == [{"rubric_adaptive": 0.0}, {"rubric_adaptive": 1.0}]
    assert len(stub_judge.requests) == 5


async def test_adaptive_call_order_and_mean_with_static_rubrics(stub_judge, judge) -> None:
    cache = RubricCache()
    stub_judge.script_scores(1, 1, 0)  # static: one per non-empty text
    stub_judge.script(generation(positive=["Depth"], negative=["Vague"]))
    stub_judge.script_scores(1, 0, 0)  # Depth over the three texts
    stub_judge.script_scores(1, 1, 0)  # Vague over the three texts
    stub_judge.script_scores(1, 0, 0, 0, 1, 1)  # final: text-major, rubric-minor
    rewards = await score_group_rubrics(
        ["a", "b", "c", "d"],
        ["one", "two", "", "three"],
        ground_truth="truth",
        question="q",
        judge=judge,
        rubrics=[QUALITY],
        use_adaptive=True,
        cache=cache,
    )
    assert rewards == [
        {"rubric_quality": 1.0, "rubric_adaptive": 1.0},  # depth 1 -> 1.0, vague 0 -> 1.0
        {"rubric_quality": 1.0, "rubric_adaptive": 0.5},  # depth 0 -> 0.0, vague 0 -> 1.0
        {"rubric_quality": 0.0, "rubric_adaptive": 0.0},  # empty
        {"rubric_quality": 0.0, "rubric_adaptive": 0.5},  # depth 1 -> 1.0, vague 1 -> 0.0
    ]
    assert [r.title for r in cache.get("q").all] == ["Depth", "Vague"]
    prompts = stub_judge.prompts
    assert "Responses:\nResponse 1:\none\n\nResponse 2:\ntwo\n\nResponse 3:\nthree" in prompts[3]
    assert "Ground Truth: truth" in prompts[3]
    assert all("Depth" in p for p in prompts[4:7]) and all("Vague" in p for p in prompts[7:10])
    assert ["one" in prompts[10], "one" in prompts[11], "two" in prompts[12]] == [True] * 3


async def test_adaptive_without_retained_rubrics_gives_zero(stub_judge, judge) -> None:
    stub_judge.script(generation(positive=["Flat"]))
    stub_judge.script_scores(1, 1)
    rewards = await score_group_rubrics(
        ["r1", "r2"],
        ["a", "b"],
        ground_truth=None,
        question="q",
        judge=judge,
        use_adaptive=True,
    )
    assert rewards == [{"rubric_adaptive": 0.0}, {"rubric_adaptive": 0.0}]


async def test_adaptive_mean_overrides_a_static_adaptive_key(stub_judge, judge) -> None:
    stub_judge.script_scores(1)  # the static "Adaptive" rubric; one text, so no generation
    rewards = await score_group_rubrics(
        ["r1"],
        ["answer"],
        ground_truth=None,
        question="q",
        judge=judge,
        rubrics=[Rubric("Adaptive", "d")],
        use_adaptive=True,
    )
    assert rewards == [{"rubric_adaptive": 0.0}]
    assert len(stub_judge.requests) == 1


async def test_adaptive_ignores_cache_when_disabled(stub_judge, judge) -> None:
    stub_judge.script_scores(1)
    cache = RubricCache()
    rewards = await score_group_rubrics(
        ["r1"],
        ["a"],
        ground_truth=None,
        question="q",
        judge=judge,
        rubrics=[QUALITY],
        existing_rubrics=[HALLUCINATION],
        cache=cache,
    )
    assert rewards == [{"rubric_quality": 1.0}]
    assert len(stub_judge.requests) == 1


async def test_group_scoring_propagates_judge_errors(stub_judge, judge) -> None:
    stub_judge.script("nonsense")
    with pytest.raises(JudgeError):
        await score_group_rubrics(
            ["r1", "r2"],
            ["a", "b"],
            ground_truth=None,
            question="q",
            judge=judge,
            rubrics=[QUALITY],
        )


# --- rank_group_rubrics ----------------------------------------------------------------


async def test_rank_group_rubrics_orders_better_above_worse(stub_judge, judge) -> None:
    stub_judge.script(json.dumps({"ranking": [[1], [2], [0]], "reasoning": "r"}))
    rewards = await rank_group_rubrics(
        ["r1", "r2"],
        ["bad", "good"],
        ground_truth="reference",
        question="q",
        judge=judge,
        rubrics=[QUALITY],
    )
    assert rewards == [{"rubric_quality": 0.0}, {"rubric_quality": 1.0}]
    assert "--- Response 2 ---\nreference" in stub_judge.prompts[0]


async def test_rank_group_rubrics_one_key_per_rubric_without_reference(stub_judge, judge) -> None:
    stub_judge.script(json.dumps({"ranking": [[0], [1]]}), json.dumps({"ranking": [[1], [0]]}))
    rewards = await rank_group_rubrics(
        ["r1", "r2"],
        ["x", "y"],
        ground_truth="ignored",
        question="q",
        judge=judge,
        rubrics=[QUALITY, HALLUCINATION],
        include_ground_truth=False,
    )
    assert rewards == [
        {"rubric_quality": 1.0, "rubric_hallucination": 0.0},
        {"rubric_quality": 0.0, "rubric_hallucination": 1.0},
    ]
    assert all("ignored" not in prompt for prompt in stub_judge.prompts)


async def test_rank_group_rubrics_propagates_judge_errors(stub_judge, judge) -> None:
    stub_judge.script(json.dumps({"ranking": [1, 0]}))
    with pytest.raises(JudgeError, match="tiers"):
        await rank_group_rubrics(
            ["r1", "r2"],
            ["x", "y"],
            ground_truth=None,
            question="q",
            judge=judge,
            rubrics=[QUALITY],
        )
