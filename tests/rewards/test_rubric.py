"""Rubric values, single evaluations and rankings (judge through the ``AsyncOpenAI`` seam)."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import pickle
from typing import Any

import cloudpickle
import pytest

from benchmax.rewards import (
    JudgeError,
    RankingAnchor,
    Rubric,
    RubricEvaluation,
    RubricRanking,
    evaluate_rubric_ranking,
    evaluate_single_rubric,
)

SCORED = {-1: "bad", 1: "okay", 3: "good"}


def ranking(tiers: list[Any], reasoning: str = "ranked") -> str:
    return json.dumps({"ranking": tiers, "reasoning": reasoning})


# --- Rubric -----------------------------------------------------------------------


def test_rubric_positional_construction_and_defaults() -> None:
    rubric = Rubric("quality", "description")
    assert (rubric.title, rubric.description, rubric.polarity, rubric.score_map) == (
        "quality",
        "description",
        "positive",
        None,
    )
    assert rubric.allowed_scores == (0.0, 1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        rubric.title = "x"  # type: ignore[misc]
    assert not hasattr(rubric, "__dict__")


@pytest.mark.parametrize("dumps", [pickle.dumps, cloudpickle.dumps])
def test_rubric_pickles_equal(dumps: Any) -> None:
    rubric = Rubric("q", "d", polarity="negative", score_map=SCORED)
    assert pickle.loads(dumps(rubric)) == rubric


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "fragment"),
    [
        (("", "d"), {}, ValueError, "rubric title must be non-empty"),
        ((" ", "d"), {}, ValueError, "rubric title must be non-empty"),
        (("t", ""), {}, ValueError, "rubric description must be non-empty"),
        (("t", "d"), {"polarity": "neutral"}, ValueError, "'positive' or 'negative'"),
        (("t", "d"), {"score_map": {1: "one"}}, ValueError, "at least two scores"),
        (("t", "d"), {"score_map": {}}, ValueError, "at least two scores"),
        (("t", "d"), {"score_map": {0: "a", "1": "b"}}, TypeError, "keys must be numeric"),
        (("t", "d"), {"score_map": {0: "a", True: "b"}}, TypeError, "keys must be numeric"),
        (("t", "d"), {"score_map": {0: "a", math.inf: "b"}}, ValueError, "keys must be finite"),
        (("t", "d"), {"score_map": {0: "a", 1: ""}}, ValueError, "descriptions must be non-empty"),
        (("t", "d"), {"score_map": {0: "a", 1: 5}}, ValueError, "descriptions must be non-empty"),
    ],
)
def test_rubric_validation(
    args: tuple[Any, ...], kwargs: dict[str, Any], error: type[Exception], fragment: str
) -> None:
    with pytest.raises(error, match=fragment):
        Rubric(*args, **kwargs)


@pytest.mark.parametrize(
    ("score_map", "error", "fragment"),
    [
        ([], ValueError, "at least two scores"),
        ([(0, "a"), (1, "b")], TypeError, "rubric score_map must be a mapping"),
        ({0: "", "x": "b"}, ValueError, "descriptions must be non-empty"),  # entry by entry
        ({"x": "", 0: "a"}, TypeError, "keys must be numeric"),
        ({math.nan: "", 0: "a"}, ValueError, "keys must be finite"),
    ],
)
def test_rubric_score_map_checks_in_order(
    score_map: Any, error: type[Exception], fragment: str
) -> None:
    with pytest.raises(error, match=fragment):
        Rubric("t", "d", score_map=score_map)


def test_rubric_validation_order_title_first() -> None:
    with pytest.raises(ValueError, match="title"):
        Rubric("", "", polarity="bad")  # type: ignore[arg-type]


def test_reward_for_normalizes_over_the_score_map_and_inverts_negative() -> None:
    positive = Rubric("q", "d", score_map=SCORED)
    negative = Rubric("q", "d", polarity="negative", score_map=SCORED)
    assert positive.allowed_scores == (-1.0, 1.0, 3.0)
    assert [positive.reward_for(s) for s in (-1, 1, 3)] == [0.0, 0.5, 1.0]
    assert [negative.reward_for(s) for s in (-1, 1, 3.0)] == [1.0, 0.5, 0.0]
    uneven = Rubric("q", "d", score_map={0: "none", 1: "some", 3: "all"})
    assert uneven.reward_for(1) == pytest.approx(1 / 3)
    binary_negative = Rubric("flaw", "d", polarity="negative")
    assert binary_negative.reward_for(1) == 0.0
    assert binary_negative.reward_for(0) == 1.0


def test_reward_for_rejects_out_of_set_and_non_numeric() -> None:
    rubric = Rubric("q", "d", score_map=SCORED)
    with pytest.raises(ValueError, match=r"raw_score must be one of \[-1.0, 1.0, 3.0\]"):
        rubric.reward_for(0)
    with pytest.raises(ValueError, match="one of"):
        rubric.reward_for(math.nan)
    with pytest.raises(TypeError, match="raw_score must be numeric"):
        rubric.reward_for(True)
    with pytest.raises(TypeError, match="raw_score must be numeric"):
        rubric.reward_for("1")  # type: ignore[arg-type]


# --- RankingAnchor and result types -------------------------------------------------


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("", 0.5), "ranking anchor response must be non-empty"),
        (("ok", -0.1), r"ranking anchor score must be within \[0, 1\]"),
        (("ok", 1.5), r"\[0, 1\]"),
        (("ok", math.nan), r"\[0, 1\]"),
        (("ok", "0.5"), r"\[0, 1\]"),
        (("ok", True), r"\[0, 1\]"),
        (("ok", 0.5, ""), "ranking anchor label must be non-empty or None"),
    ],
)
def test_ranking_anchor_validation(args: tuple[Any, ...], fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        RankingAnchor(*args)


def test_result_types_positional_and_frozen() -> None:
    evaluation = RubricEvaluation(1.0, "correct", '{"score": 1, "reasoning": "correct"}')
    assert evaluation.score == 1.0 and evaluation.reasoning == "correct"
    result = RubricRanking((1.0, 0.0), ((1,), (0,)), "why", "raw")
    assert pickle.loads(pickle.dumps(result)) == result
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.reasoning = "x"  # type: ignore[misc]
    assert RankingAnchor("fine", 0.5).label is None


# --- evaluate_single_rubric ------------------------------------------------------------


async def test_evaluate_single_rubric_returns_evaluation_and_sends_ground_truth(
    stub_judge, judge, caplog: pytest.LogCaptureFixture
) -> None:
    raw = '{"score": 1, "reasoning": "correct"}'
    stub_judge.script(raw)
    with caplog.at_level(logging.INFO, logger="benchmax.rewards.rubric"):
        evaluation = await evaluate_single_rubric(
            Rubric("Clear  Answer", "Is clear."),
            question="What is 2+2?",
            response="4",
            judge=judge,
            ground_truth="reference",
        )
    assert evaluation == RubricEvaluation(1.0, "correct", raw)
    assert isinstance(evaluation.score, float)
    prompt = stub_judge.prompts[0]
    for fragment in ("reference", "What is 2+2?", "Clear  Answer", "Is clear.", "positive"):
        assert fragment in prompt
    assert stub_judge.requests[0]["temperature"] == 0.0
    assert "max_tokens" not in stub_judge.requests[0]
    assert "rubric.evaluated title='Clear  Answer' polarity=positive score=1.0" in caplog.text


async def test_evaluate_single_rubric_request_id_slug(stub_judge, judge, judge_calls) -> None:
    stub_judge.script_scores(0)
    await evaluate_single_rubric(
        Rubric(" Clear \t Answer ", "d"), question="q", response="", judge=judge
    )
    assert judge_calls == [{"request_id": "rubric:clear-answer"}]  # default temperature
    assert "Response to grade:\n" in stub_judge.prompts[0]  # empty response still sent


async def test_evaluate_single_rubric_accepts_score_map_values(stub_judge, judge) -> None:
    stub_judge.script('{"score": 3.0}', '{"score": -1}')
    rubric = Rubric("q", "d", score_map=SCORED)
    first = await evaluate_single_rubric(rubric, question="q", response="r", judge=judge)
    second = await evaluate_single_rubric(rubric, question="q", response="r", judge=judge)
    assert (first.score, first.reasoning) == (3.0, "")
    assert second.score == -1.0


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        ('{"score": 0.5}', r"judge score 0\.5 is not one of \[0\.0, 1\.0\]"),
        ('{"score": 2}', "judge score 2 is not one of"),
        ("{}", "judge response must contain a numeric score"),
        ('{"score": true}', "numeric score"),
        # beyond.md §9: a numeric string counts as its number, still within the set
        ('{"score": "0.5"}', r"judge score 0\.5 is not one of \[0\.0, 1\.0\]"),
        ('{"score": "yes"}', "numeric score"),
        ('{"score": ""}', "numeric score"),
        ('{"score": "NaN"}', "numeric score"),
        ('{"score": "1_0"}', "numeric score"),
        ('{"score": "1e999"}', "judge score must be finite"),
        ('{"score": NaN}', "judge score must be finite"),
        ('{"score": Infinity}', "judge score must be finite"),
        ('{"score": 1, "reasoning": null}', "judge reasoning must be a string when provided"),
        ('{"score": 1, "reasoning": 5}', "reasoning must be a string"),
    ],
)
async def test_evaluate_single_rubric_rejects_bad_payloads(
    stub_judge, judge, payload: str, fragment: str
) -> None:
    stub_judge.script(payload)
    with pytest.raises(JudgeError, match=fragment) as raised:
        await evaluate_single_rubric(Rubric("Q", "d"), question="q", response="r", judge=judge)
    assert str(raised.value).startswith("rubric 'Q' evaluation failed: ")
    assert isinstance(raised.value.__cause__, ValueError)


async def test_evaluate_single_rubric_wraps_judge_errors(stub_judge, judge) -> None:
    stub_judge.script("no json here")
    with pytest.raises(JudgeError, match="rubric 'Q' evaluation failed: judge request failed"):
        await evaluate_single_rubric(Rubric("Q", "d"), question="q", response="r", judge=judge)


# --- evaluate_rubric_ranking -------------------------------------------------------------


async def rank(judge, responses, **kwargs: Any) -> RubricRanking:
    return await evaluate_rubric_ranking(
        Rubric("Quality", "Better is better."),
        question="q",
        responses=responses,
        judge=judge,
        **kwargs,
    )


async def test_plain_ranking_best_is_one_worst_is_zero(stub_judge, judge) -> None:
    stub_judge.script(ranking([[1], [0]]))
    result = await rank(judge, ["worse", "better"])
    assert result.scores == (0.0, 1.0)
    assert result.ranking == ((1,), (0,))
    assert result.reasoning == "ranked"
    prompt = stub_judge.prompts[0]
    assert "--- Response 0 ---\nworse" in prompt and "--- Response 1 ---\nbetter" in prompt


async def test_ground_truth_ranking_above_is_one_last_below_is_zero(stub_judge, judge) -> None:
    stub_judge.script(ranking([[1], [2], [0]]))
    result = await rank(judge, ["below", "above"], ground_truth="reference")
    assert result.scores == (0.0, 1.0)
    assert "--- Response 2 ---\nreference" in stub_judge.prompts[0]


async def test_ties_with_ground_truth_and_empty_response(stub_judge, judge) -> None:
    stub_judge.script(ranking([[1, 2], [0]]))
    result = await rank(judge, ["worst", "", "best"], ground_truth="  reference  ")
    assert result.scores == (0.0, 0.0, 0.5)
    assert result.ranking == ((1, 2), (0,))
    assert isinstance(result.ranking, tuple) and isinstance(result.ranking[0], tuple)
    prompt = stub_judge.prompts[0]
    assert "--- Response 1 ---\nbest" in prompt and "--- Response 2 ---\nreference" in prompt


async def test_anchor_bands_interpolate(stub_judge, judge) -> None:
    stub_judge.script(ranking([[3], [1], [2], [0]]))
    anchors = [RankingAnchor("acceptable", 0.4), RankingAnchor("great", 0.7, label="top")]
    result = await rank(judge, ["weak", "strong"], anchors=anchors)
    assert result.scores[0] == 0.0
    assert result.scores[1] == pytest.approx(0.55)
    assert "--- Response 3 ---\ngreat" in stub_judge.prompts[0]


async def test_ranking_request_id_and_stripped_judged_items(stub_judge, judge, judge_calls) -> None:
    stub_judge.script(ranking([[2], [1], [0]]))
    result = await evaluate_rubric_ranking(
        Rubric("Clear  Answer", "d"),
        question="q",
        responses=[" a ", "\t", "b \n"],
        judge=judge,
        anchors=[RankingAnchor(" great ", 0.9)],
    )
    assert judge_calls == [{"request_id": "rubric-ranking:clear-answer"}]
    assert (
        "--- Response 0 ---\na\n\n--- Response 1 ---\nb\n\n--- Response 2 ---\ngreat"
        in stub_judge.prompts[0]
    )
    assert result.scores == (0.0, 0.0, pytest.approx(0.9 * 0.5))
    assert result.ranking == ((2,), (1,), (0,))


async def test_single_nonempty_response_without_reference_needs_no_judge(stub_judge, judge) -> None:
    result = await rank(judge, ["", "answer"])
    assert result == RubricRanking((0.0, 1.0), ((0,),), "Only one non-empty response", "")
    assert stub_judge.requests == []


async def test_all_empty_responses_need_no_judge(stub_judge, judge) -> None:
    result = await rank(judge, ["", "  ", ""])
    assert result == RubricRanking((0.0, 0.0, 0.0), (), "All responses are empty", "")
    assert stub_judge.requests == []


async def test_single_response_with_ground_truth_is_judged(stub_judge, judge) -> None:
    stub_judge.script(ranking([[1], [0]]))
    result = await rank(judge, ["answer"], ground_truth="reference")
    assert result.scores == (0.0,)
    assert len(stub_judge.requests) == 1


async def test_single_response_with_anchors_is_judged(stub_judge, judge) -> None:
    stub_judge.script(ranking([[1], [0]]))
    result = await rank(judge, ["", "answer"], anchors=[RankingAnchor("fine", 0.5)])
    assert result.scores == (0.0, 0.0)  # ranked below the only anchor, at the last position
    assert result.ranking == ((1,), (0,))
    assert len(stub_judge.requests) == 1


async def test_flat_ranking_is_rejected_as_tiers(stub_judge, judge) -> None:
    stub_judge.script(ranking([1, 0]))
    with pytest.raises(JudgeError, match="tiers") as raised:
        await rank(judge, ["a", "b"])
    assert str(raised.value).startswith("rubric 'Quality' ranking failed: ")


@pytest.mark.parametrize(
    ("tiers", "fragment"),
    [
        (None, "judge response must contain a non-empty ranking"),
        ([], "non-empty ranking"),
        ({"0": 1}, "non-empty ranking"),
        ([[0], []], "judge ranking tiers must be non-empty lists"),
        ([[0], [1.0]], "judge ranking indices must be integers"),
        ([[0], [True]], "indices must be integers"),
        ([[0], [2]], r"judge ranking index 2 is outside 0\.\.1"),
        ([[-1], [0]], "index -1 is outside"),
        ([[0, 1], [1]], "judge ranking repeated response index 1"),
        ([[0]], r"judge ranking omitted response indices: \[1\]"),
        ([[0, 0], "x"], "repeated response index 0"),
    ],
)
async def test_ranking_parse_errors(stub_judge, judge, tiers: Any, fragment: str) -> None:
    stub_judge.script(json.dumps({"ranking": tiers}) if tiers is not None else "{}")
    with pytest.raises(JudgeError, match=fragment):
        await rank(judge, ["a", "b"])


async def test_ranking_reasoning_must_be_a_string(stub_judge, judge) -> None:
    stub_judge.script(json.dumps({"ranking": [[0, 1]], "reasoning": None}))
    with pytest.raises(JudgeError, match="reasoning must be a string"):
        await rank(judge, ["a", "b"])


async def test_ground_truth_plus_anchors_is_rejected_without_judge(stub_judge, judge) -> None:
    with pytest.raises(ValueError, match="pass ground_truth or anchors, not both"):
        await rank(judge, ["a", "b"], ground_truth="ref", anchors=[RankingAnchor("x", 0.5)])
    # a blank ground truth counts as absent
    stub_judge.script(ranking([[0], [2], [1]]))
    await rank(judge, ["a", "b"], ground_truth="  ", anchors=[RankingAnchor("x", 0.5)])
    assert len(stub_judge.requests) == 1


async def test_descending_anchors_are_rejected(stub_judge, judge) -> None:
    anchors = [RankingAnchor("good", 0.9), RankingAnchor("bad", 0.1)]
    with pytest.raises(ValueError, match="worst to best"):
        await rank(judge, ["a", "b"], anchors=anchors)
    assert stub_judge.requests == []


@pytest.mark.parametrize("ceiling", [-0.1, 1.1, math.nan, "0.3"])
async def test_ceiling_is_validated_first(stub_judge, judge, ceiling: Any) -> None:
    with pytest.raises(ValueError, match=r"below_ground_truth_ceiling must be within \[0, 1\]"):
        await rank(judge, ["a"], anchors=["not an anchor"], below_ground_truth_ceiling=ceiling)


async def test_anchor_checks_come_in_order(stub_judge, judge) -> None:
    descending = [RankingAnchor("good", 0.9), RankingAnchor("bad", 0.1)]
    with pytest.raises(TypeError, match="RankingAnchor values"):
        await rank(judge, ["a", "b"], anchors=[*descending, "x"], ground_truth="ref")
    with pytest.raises(ValueError, match="worst to best"):
        await rank(judge, ["a", "b"], anchors=descending, ground_truth="ref")
    assert stub_judge.requests == []


async def test_non_anchor_values_are_rejected(stub_judge, judge) -> None:
    with pytest.raises(TypeError, match="anchors must contain RankingAnchor values"):
        await rank(judge, ["a", "b"], anchors=[("x", 0.5)])


async def test_ceiling_caps_responses_just_below_the_reference(stub_judge, judge) -> None:
    stub_judge.script(ranking([[2], [0], [1]]))
    result = await rank(
        judge, ["second", "third"], ground_truth="ref", below_ground_truth_ceiling=0.8
    )
    assert result.scores == (pytest.approx(0.4), 0.0)


async def test_ranking_logs_result(stub_judge, judge, caplog: pytest.LogCaptureFixture) -> None:
    stub_judge.script(ranking([[1], [0], [2]]))
    with caplog.at_level(logging.INFO, logger="benchmax.rewards.rubric"):
        await rank(judge, ["a", "b"], anchors=[RankingAnchor("mid", 0.5)])
    assert "rubric.ranked title='Quality'" in caplog.text
    assert "('anchor@0.5', 0.5)" in caplog.text
