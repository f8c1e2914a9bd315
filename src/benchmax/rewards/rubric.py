"""Rubrics and their judge evaluations: single-response scores and group rankings."""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

from benchmax._value_checks import is_finite_number, is_non_empty_str, is_numeric
from benchmax.rewards import _ranking
from benchmax.rewards.judge import Judge, JudgeError
from benchmax.rewards.prompts import (
    build_rubric_evaluation_prompt,
    build_rubric_ranking_prompt,
    build_rubric_trajectory_prompt,
)

__all__ = [
    "RankingAnchor",
    "Rubric",
    "RubricEvaluation",
    "RubricPolarity",
    "RubricRanking",
    "evaluate_rubric_ranking",
    "evaluate_single_rubric",
]

logger = logging.getLogger(__name__)

RubricPolarity = Literal["positive", "negative"]

_BINARY_SCORES = (0.0, 1.0)
# A score sent as a JSON string holding a decimal number ("1", "0.5", "-1e0").
_NUMBER_TEXT = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


@dataclass(frozen=True, slots=True)
class Rubric:
    """One judged criterion.

    ``positive`` rubrics reward meeting the criterion; ``negative`` rubrics
    describe a flaw whose presence the judge reports, so their reward is higher
    when it is absent. ``score_map`` declares the allowed raw scores (binary
    0/1 when ``None``).
    """

    title: str
    description: str
    polarity: RubricPolarity = "positive"
    score_map: Mapping[float, str] | None = None

    def __post_init__(self) -> None:
        if not is_non_empty_str(self.title):
            raise ValueError("rubric title must be non-empty")
        if not is_non_empty_str(self.description):
            raise ValueError("rubric description must be non-empty")
        if self.polarity not in ("positive", "negative"):
            raise ValueError("rubric polarity must be 'positive' or 'negative'")
        if self.score_map is not None:
            if len(self.score_map) < 2:
                raise ValueError("rubric score_map must contain at least two scores")
            if not isinstance(self.score_map, Mapping):
                raise TypeError("rubric score_map must be a mapping")
            for key, description in self.score_map.items():
                if not is_numeric(key):
                    raise TypeError("rubric score_map keys must be numeric")
                if not is_finite_number(key):
                    raise ValueError("rubric score_map keys must be finite")
                if not is_non_empty_str(description):
                    raise ValueError("rubric score_map descriptions must be non-empty")

    @property
    def allowed_scores(self) -> tuple[float, ...]:
        """The raw scores a judge may give, ascending."""
        if self.score_map is None:
            return _BINARY_SCORES
        return tuple(sorted(float(key) for key in self.score_map))

    def reward_for(self, raw_score: float) -> float:
        """Normalize an allowed raw score into ``[0, 1]``, inverted for negative polarity."""
        if not is_numeric(raw_score):
            raise TypeError("raw_score must be numeric")
        allowed = self.allowed_scores
        if not is_finite_number(raw_score) or float(raw_score) not in allowed:
            raise ValueError(f"raw_score must be one of {list(allowed)}")
        low, high = allowed[0], allowed[-1]
        normalized = (float(raw_score) - low) / (high - low)
        return normalized if self.polarity == "positive" else 1.0 - normalized


@dataclass(frozen=True, slots=True)
class RankingAnchor:
    """A reference response with a known place on the absolute ``[0, 1]`` scale."""

    response: str
    score: float
    label: str | None = None

    def __post_init__(self) -> None:
        if not is_non_empty_str(self.response):
            raise ValueError("ranking anchor response must be non-empty")
        if not (is_finite_number(self.score) and 0 <= self.score <= 1):
            raise ValueError("ranking anchor score must be within [0, 1]")
        if self.label is not None and not is_non_empty_str(self.label):
            raise ValueError("ranking anchor label must be non-empty or None")


@dataclass(frozen=True, slots=True)
class RubricEvaluation:
    """The judge's raw allowed score for one response, with its explanation."""

    score: float
    reasoning: str
    raw_response: str


@dataclass(frozen=True, slots=True)
class RubricRanking:
    """Scores in ``[0, 1]`` per input response and the judge's tiers (judge-local indices)."""

    scores: tuple[float, ...]
    ranking: tuple[tuple[int, ...], ...]
    reasoning: str
    raw_response: str


def _payload_reasoning(payload: Mapping[str, object]) -> str:
    reasoning = payload.get("reasoning", "")
    if not isinstance(reasoning, str):
        raise ValueError("judge reasoning must be a string when provided")
    return reasoning


def _payload_score(payload: Mapping[str, object], rubric: Rubric) -> float:
    """The verdict's score; a string holding a finite number (``"1"``, ``"0.5"``) is read
    as that number (``beyond.md`` §9), other strings and bools stay non-numeric."""
    score = payload.get("score")
    if isinstance(score, str) and _NUMBER_TEXT.fullmatch(score.strip()):
        score = float(score)
    if not is_numeric(score):
        raise ValueError("judge response must contain a numeric score")
    if not is_finite_number(score):
        raise ValueError("judge score must be finite")
    allowed = rubric.allowed_scores
    if float(score) not in allowed:
        raise ValueError(f"judge score {score!r} is not one of {list(allowed)}")
    return float(score)


async def evaluate_single_rubric(
    rubric: Rubric,
    *,
    question: str,
    response: str,
    judge: Judge,
    ground_truth: str | None = None,
    log_result: bool = True,
    read_trajectory: bool = False,
) -> RubricEvaluation:
    """Ask the judge for ``rubric``'s raw score of one response.

    With ``read_trajectory`` (keyword-only, beyond 0.2), ``response`` is a whole
    conversation rendered by :func:`benchmax.rewards.transcript.render_transcript` and
    the judge is asked to grade the assistant's conduct over it
    (:func:`~benchmax.rewards.prompts.build_rubric_trajectory_prompt`).

    Raises :class:`JudgeError` when the judge fails or answers outside the
    rubric's allowed scores.
    """
    if read_trajectory:
        prompt = build_rubric_trajectory_prompt(
            rubric, question=question, transcript=response, ground_truth=ground_truth
        )
    else:
        prompt = build_rubric_evaluation_prompt(
            rubric, question=question, response=response, ground_truth=ground_truth
        )
    with _failures_as_judge_error(rubric, "evaluation"):
        payload, raw = await judge.request_json(
            prompt, request_id=f"rubric:{_slug_title(rubric.title)}"
        )
        score = _payload_score(payload, rubric)
        reasoning = _payload_reasoning(payload)
    if log_result:
        logger.info(
            "rubric.evaluated title=%r polarity=%s score=%s reasoning=%s",
            rubric.title,
            rubric.polarity,
            score,
            reasoning,
        )
    return RubricEvaluation(score, reasoning, raw)


def _validate_ranking_inputs(
    anchors: Sequence[RankingAnchor], reference: str, ceiling: float
) -> None:
    if not (is_numeric(ceiling) and 0 <= ceiling <= 1):
        raise ValueError("below_ground_truth_ceiling must be within [0, 1]")
    if not all(isinstance(anchor, RankingAnchor) for anchor in anchors):
        raise TypeError("anchors must contain RankingAnchor values")
    for left, right in itertools.pairwise(anchors):
        if left.score > right.score:
            raise ValueError("ranking anchors must be ordered from worst to best score")
    if anchors and reference:
        raise ValueError("pass ground_truth or anchors, not both")


async def evaluate_rubric_ranking(
    rubric: Rubric,
    *,
    question: str,
    responses: Sequence[str],
    judge: Judge,
    ground_truth: str | None = None,
    anchors: Sequence[RankingAnchor] = (),
    below_ground_truth_ceiling: float = 0.3,
    log_result: bool = True,
) -> RubricRanking:
    """Rank ``responses`` on one rubric and turn positions into ``[0, 1]`` scores.

    Scores are relative to the group, placed against a ranked ground truth
    (above it 0.5..1.0, below it at most ``below_ground_truth_ceiling``), or
    interpolated between ``anchors`` of known absolute score. Empty responses
    score 0.0 and are never shown to the judge.
    """
    anchors = tuple(anchors)
    reference = str(ground_truth).strip() if ground_truth is not None else ""
    _validate_ranking_inputs(anchors, reference, below_ground_truth_ceiling)

    scores = [0.0] * len(responses)
    nonempty = [
        (index, text.strip()) for index, text in enumerate(responses) if text and text.strip()
    ]
    if not nonempty:
        return RubricRanking(tuple(scores), (), "All responses are empty", "")
    if len(nonempty) == 1 and not reference and not anchors:
        scores[nonempty[0][0]] = 1.0
        return RubricRanking(tuple(scores), ((0,),), "Only one non-empty response", "")

    judged = [text for _, text in nonempty]
    reference_index = None
    if reference:
        reference_index = len(judged)
        judged.append(reference)
    first_anchor_index = len(judged)
    judged.extend(anchor.response.strip() for anchor in anchors)
    max_position = float(len(judged) - 1)

    prompt = build_rubric_ranking_prompt(rubric, question=question, responses=judged)
    with _failures_as_judge_error(rubric, "ranking"):
        payload, raw = await judge.request_json(
            prompt, request_id=f"rubric-ranking:{_slug_title(rubric.title)}"
        )
        tiers = _ranking.parse_ranking(payload.get("ranking"), len(judged))
        positions = _ranking.tier_positions(tiers)
        seams = _ranking.monotone_seams(
            [
                (positions[first_anchor_index + offset], anchor.score)
                for offset, anchor in enumerate(anchors)
            ]
        )
        for local_index, (original_index, _) in enumerate(nonempty):
            position = positions[local_index]
            if seams:
                value = _ranking.anchored_score(position, seams, max_position)
            elif reference_index is not None:
                value = _ranking.reference_score(
                    position,
                    positions[reference_index],
                    max_position,
                    below_ground_truth_ceiling,
                )
            else:
                value = _ranking.relative_score(position, max_position)
            scores[original_index] = max(0.0, min(1.0, value))
        reasoning = _payload_reasoning(payload)
    if log_result:
        logger.info(
            "rubric.ranked title=%r polarity=%s ranking=%s scores=%s anchors=%s reasoning=%s",
            rubric.title,
            rubric.polarity,
            tiers,
            scores,
            [(anchor.label or f"anchor@{anchor.score:g}", anchor.score) for anchor in anchors],
            reasoning,
        )
    return RubricRanking(tuple(scores), tiers, reasoning, raw)


def _slug_title(title: str) -> str:
    """A rubric title lower-cased with whitespace runs joined by hyphens (request ids)."""
    return "-".join(title.lower().split())


@contextmanager
def _failures_as_judge_error(rubric: Rubric, action: str) -> Iterator[None]:
    """Any exception in the block is logged (``rubric.<action>_failed``) and raised as
    ``JudgeError("rubric <title> <action> failed: <error>")``."""
    try:
        yield
    except Exception as error:
        logger.exception("rubric.%s_failed title=%r", action, rubric.title)
        raise JudgeError(f"rubric {rubric.title!r} {action} failed: {error}") from error
