"""Adaptive rubrics: judge-proposed criteria kept only while they discriminate.

The caller owns the :class:`RubricCache`; it lives exactly as long as the
caller keeps it and is keyed by a hash of the question, never its text.
"""

from __future__ import annotations

import hashlib
import logging
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from benchmax._value_checks import is_int_at_least, is_non_empty_str
from benchmax.rewards._concurrency import evaluate_concurrently
from benchmax.rewards.judge import Judge, JudgeError
from benchmax.rewards.prompts import build_adaptive_rubric_prompt
from benchmax.rewards.rubric import Rubric, RubricPolarity

__all__ = [
    "AdaptiveRubrics",
    "RubricCache",
    "generate_adaptive_rubrics",
    "generate_and_cache_adaptive_rubrics",
    "prompt_key",
]

logger = logging.getLogger(__name__)

_GENERATION_FIELDS: tuple[tuple[str, RubricPolarity], ...] = (
    ("positive_rubrics", "positive"),
    ("negative_rubrics", "negative"),
)


@dataclass(frozen=True, slots=True)
class AdaptiveRubrics:
    """Generated or retained rubrics, split by polarity."""

    positive: tuple[Rubric, ...] = ()
    negative: tuple[Rubric, ...] = ()

    @property
    def all(self) -> tuple[Rubric, ...]:
        """Positive rubrics followed by negative ones."""
        return self.positive + self.negative


def prompt_key(prompt: str) -> str:
    """The SHA-256 hex digest under which a prompt's rubrics are cached."""
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()


class RubricCache:
    """Per-prompt store of the most discriminative adaptive rubrics.

    For each prompt and polarity it keeps at most ``max_per_polarity`` rubrics,
    preferring those whose judge scores varied most across responses.
    """

    def __init__(self, *, max_per_polarity: int = 3) -> None:
        if not is_int_at_least(max_per_polarity, 1):
            raise ValueError("max_per_polarity must be positive")
        self.max_per_polarity = max_per_polarity
        # prompt hash -> polarity -> title -> (rubric, deviation of its scores)
        self._entries: dict[str, dict[str, dict[str, tuple[Rubric, float]]]] = {}

    def get(self, prompt: str) -> AdaptiveRubrics:
        """A snapshot of the rubrics retained for ``prompt``, best first."""
        buckets = self._entries.get(prompt_key(prompt))
        if buckets is None:
            return AdaptiveRubrics()
        return AdaptiveRubrics(
            positive=tuple(r for r, _ in _ranked(buckets.get("positive", {}))),
            negative=tuple(r for r, _ in _ranked(buckets.get("negative", {}))),
        )

    def consider(
        self, prompt: str, rubric: Rubric, scores: tuple[float, ...] | list[float]
    ) -> bool:
        """Offer ``rubric`` with its raw scores across responses; return whether it is kept.

        Rubrics whose scores do not vary are never stored.
        """
        values = [float(score) for score in scores]
        if not all(math.isfinite(value) for value in values):
            raise ValueError("adaptive rubric scores must be finite")
        if len(values) < 2 or len(set(values)) == 1:
            return False
        deviation = statistics.pstdev(values)
        buckets = self._entries.setdefault(prompt_key(prompt), {})
        bucket = buckets.setdefault(rubric.polarity, {})
        bucket[rubric.title] = (rubric, deviation)
        kept = _ranked(bucket)[: self.max_per_polarity]
        bucket.clear()
        bucket.update((candidate.title, (candidate, dev)) for candidate, dev in kept)
        return rubric.title in bucket


def _ranked(bucket: Mapping[str, tuple[Rubric, float]]) -> list[tuple[Rubric, float]]:
    """Candidates by descending deviation, ties broken by title."""
    return sorted(bucket.values(), key=lambda entry: (-entry[1], entry[0].title))


def _parse_generated(payload: Mapping[str, object]) -> AdaptiveRubrics:
    parsed: dict[str, tuple[Rubric, ...]] = {}
    for field, polarity in _GENERATION_FIELDS:
        items = payload.get(field, [])
        if not isinstance(items, list):
            raise ValueError(f"judge response field {field!r} must be a list")
        rubrics = []
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise ValueError(f"judge response {field}[{i}] must be an object")
            title, description = item.get("title"), item.get("description")
            if not is_non_empty_str(title):
                raise ValueError(f"judge response {field}[{i}].title must be non-empty")
            if not is_non_empty_str(description):
                raise ValueError(f"judge response {field}[{i}].description must be non-empty")
            rubrics.append(Rubric(title.strip(), description.strip(), polarity=polarity))
        parsed[polarity] = tuple(rubrics)
    return AdaptiveRubrics(positive=parsed["positive"], negative=parsed["negative"])


async def generate_adaptive_rubrics(
    *,
    question: str,
    ground_truth: str,
    responses: Sequence[str],
    judge: Judge,
    existing_rubrics: Sequence[Rubric] = (),
) -> AdaptiveRubrics:
    """Ask the judge for binary rubrics that separate ``responses``."""
    prompt = build_adaptive_rubric_prompt(
        question=question,
        ground_truth=ground_truth,
        responses=responses,
        existing_rubrics=existing_rubrics,
    )
    try:
        payload, _ = await judge.request_json(prompt, request_id="adaptive-rubric-generation")
        generated = _parse_generated(payload)
    except JudgeError:
        raise
    except Exception as error:
        logger.exception("adaptive_rubrics.generation_failed")
        raise JudgeError(f"adaptive rubric generation failed: {error}") from error
    logger.info(
        "adaptive_rubrics.generated positive=%d negative=%d",
        len(generated.positive),
        len(generated.negative),
    )
    return generated


async def generate_and_cache_adaptive_rubrics(
    *,
    question: str,
    ground_truth: str,
    responses: Sequence[str],
    judge: Judge,
    cache: RubricCache,
    existing_rubrics: Sequence[Rubric] = (),
) -> AdaptiveRubrics:
    """Generate rubrics for this group, keep those that discriminate, return the cache's view.

    Needs at least two non-empty responses; otherwise the cached rubrics are
    returned without any judge call.
    """
    nonempty = [text.strip() for text in responses if text.strip()]
    if len(nonempty) < 2:
        return cache.get(question)
    shown: dict[tuple[str, str], Rubric] = {}
    for rubric in (*existing_rubrics, *cache.get(question).all):
        shown[(rubric.polarity, rubric.title)] = rubric
    generated = await generate_adaptive_rubrics(
        question=question,
        ground_truth=ground_truth,
        responses=nonempty,
        judge=judge,
        existing_rubrics=list(shown.values()),
    )
    originals = [text for text in responses if text.strip()]
    for rubric in generated.all:
        evaluations = await evaluate_concurrently(
            ((rubric, text) for text in originals),
            question=question,
            ground_truth=ground_truth,
            judge=judge,
        )
        cache.consider(question, rubric, [evaluation.score for evaluation in evaluations])
    return cache.get(question)
