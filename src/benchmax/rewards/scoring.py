"""Reward maps from rubrics: per-rollout scores, group scores and group rankings.

Every map carries one ``rubric_<slug>`` key per rubric (plus ``rubric_adaptive``
for adaptive group scoring); empty completions keep the full shape with zeros
and never reach the judge. The judge sees a completion's final answer
(:func:`~benchmax.rewards.deterministic.extract_completion_text`) without its
reasoning (:func:`~benchmax.rewards.text.without_reasoning`), so a model whose
server splits reasoning off (``reasoning_content``) and one that writes it
inline in ``<think>`` tags are judged alike; a completion that never leaves its
reasoning counts as empty.

Beyond 0.2, :func:`score_rubrics` can show the judge the whole transcript instead
(``read_trajectory``; rendered by :func:`benchmax.rewards.transcript.render_transcript`
within ``transcript_limits``) and store the judge's explanations with the rollout
(``explain``; :func:`benchmax.trajectory.annotate`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

from benchmax._value_checks import is_non_empty_str
from benchmax.rewards._concurrency import evaluate_concurrently, gather_or_cancel
from benchmax.rewards.adaptive import RubricCache, generate_and_cache_adaptive_rubrics
from benchmax.rewards.deterministic import Completion, extract_completion_text
from benchmax.rewards.judge import Judge, _last_outermost_object
from benchmax.rewards.rubric import Rubric, RubricEvaluation, evaluate_rubric_ranking
from benchmax.rewards.text import without_reasoning
from benchmax.rewards.transcript import TranscriptLimits, _cut, render_transcript
from benchmax.trajectory import annotate

__all__ = ["rank_group_rubrics", "rubric_reward_key", "score_group_rubrics", "score_rubrics"]

logger = logging.getLogger(__name__)

ADAPTIVE_REWARD_KEY = "rubric_adaptive"
JUDGE_ANNOTATION_KEY = "judge"
"""The annotation key ``score_rubrics(..., explain=True)`` stores explanations under."""
_REMARKS_LIMIT = 2000
_NON_ALPHANUMERIC = re.compile(r"[^a-z0-9]+")


def rubric_reward_key(rubric: Rubric) -> str:
    """The reward-map key of ``rubric``: ``rubric_`` plus its title as a snake-case slug."""
    slug = _NON_ALPHANUMERIC.sub("_", rubric.title.lower()).strip("_")
    if not slug:
        raise ValueError("rubric title must contain at least one letter or digit")
    return f"rubric_{slug}"


def _judged_text(completion: Completion) -> str:
    """What the judge is shown: the final answer, stripped, without its reasoning."""
    return without_reasoning(extract_completion_text(completion)).strip()


def _reward_keys(rubrics: Sequence[Rubric], *, allow_empty: bool) -> list[str]:
    if not rubrics and not allow_empty:
        raise ValueError("at least one rubric is required")
    keys = [rubric_reward_key(rubric) for rubric in rubrics]
    if len(set(keys)) != len(keys):
        raise ValueError("rubric titles must produce unique reward keys")
    return keys


def _validate_group(rollout_ids: Sequence[str], completions: Sequence[Completion]) -> None:
    if len(rollout_ids) != len(completions):
        raise ValueError("rollout_ids and completions must have the same length")
    if not rollout_ids:
        raise ValueError("rollout group must be non-empty")
    if not all(is_non_empty_str(rollout_id) for rollout_id in rollout_ids):
        raise ValueError("rollout_ids must be non-empty strings")
    if len(set(rollout_ids)) != len(rollout_ids):
        raise ValueError("rollout_ids must be unique")


def _reference(ground_truth: object) -> str | None:
    return str(ground_truth) if ground_truth is not None else None


async def score_rubrics(
    rollout_id: str,
    completion: Completion,
    *,
    ground_truth: object,
    rubrics: Sequence[Rubric],
    question: str,
    judge: Judge,
    read_trajectory: bool = False,
    transcript_limits: TranscriptLimits | None = None,
    explain: bool | str = False,
) -> dict[str, float]:
    """Score one completion on every rubric (concurrently); rewards are normalized to [0, 1].

    Keyword-only options beyond 0.2 (their defaults keep 0.2's prompts and behaviour):

    * ``read_trajectory``: the judge reads the whole transcript (``completion`` must be
      the list of messages): tool calls with their arguments and results, simulated-user
      turns and the final reply, rendered by
      :func:`~benchmax.rewards.transcript.render_transcript` within
      ``transcript_limits`` (default :class:`~benchmax.rewards.transcript.TranscriptLimits`:
      24,000 characters), and is asked to grade the assistant's conduct over it. A
      transcript whose final reply is empty still scores 0.0 without a judge call.
    * ``explain``: store the judge's explanations with the rollout, through
      :func:`benchmax.trajectory.annotate` under ``"judge"`` (or the key ``explain``
      names): ``{reward_key: {"title", "score" (the raw score), "reward", "reasoning"
      (the verdict's reasoning field), "remarks" (text the judge wrote around its JSON
      verdict, at most 2,000 characters)}}``, empty fields left out; rubrics of an
      empty completion get ``{"title", "reward": 0.0, "skipped": "empty final reply"}``.
      ``show`` and ``view`` display it. A later call with the same key replaces it.

    Raises :class:`~benchmax.rewards.judge.JudgeError` when any evaluation fails,
    ``TypeError`` when ``read_trajectory`` is given a string.
    """
    keys = _reward_keys(rubrics, allow_empty=False)
    if not is_non_empty_str(rollout_id):
        raise ValueError("rollout_id must be non-empty")
    if read_trajectory and isinstance(completion, str):
        raise TypeError("read_trajectory needs the transcript (a list of messages), not a string")
    annotation_key = _annotation_key(explain)
    text = _judged_text(completion)
    if not text:
        logger.info("rubric.scored rollout_id=%s empty_completion=true", rollout_id)
        if annotation_key is not None:
            annotate(
                annotation_key,
                {
                    key: {"title": rubric.title, "reward": 0.0, "skipped": "empty final reply"}
                    for key, rubric in zip(keys, rubrics, strict=True)
                },
            )
        return dict.fromkeys(keys, 0.0)
    if read_trajectory:
        assert not isinstance(completion, str)
        text = render_transcript(completion, limits=transcript_limits)
    evaluations = await evaluate_concurrently(
        ((rubric, text) for rubric in rubrics),
        question=question,
        ground_truth=_reference(ground_truth),
        judge=judge,
        read_trajectory=read_trajectory,
    )
    rewards = {
        key: rubric.reward_for(evaluation.score)
        for key, rubric, evaluation in zip(keys, rubrics, evaluations, strict=True)
    }
    if annotation_key is not None:
        annotate(
            annotation_key,
            {
                key: _explanation(rubric, evaluation, rewards[key])
                for key, rubric, evaluation in zip(keys, rubrics, evaluations, strict=True)
            },
        )
    logger.info("rubric.scored rollout_id=%s rewards=%s", rollout_id, rewards)
    return rewards


def _annotation_key(explain: object) -> str | None:
    if explain is False:
        return None
    if explain is True:
        return JUDGE_ANNOTATION_KEY
    if is_non_empty_str(explain):
        return explain
    raise TypeError("explain must be True, False or a non-empty annotation key")


def _explanation(rubric: Rubric, evaluation: RubricEvaluation, reward: float) -> dict[str, object]:
    """What the judge said about one rubric: its score, reward, reasoning and remarks."""
    entry: dict[str, object] = {"title": rubric.title, "score": evaluation.score, "reward": reward}
    reasoning = evaluation.reasoning.strip()
    if reasoning:
        entry["reasoning"] = reasoning
    raw = evaluation.raw_response
    verdict = _last_outermost_object(raw)
    remarks = raw.replace(verdict, " ") if verdict else raw
    remarks = "\n".join(
        line for line in remarks.splitlines() if not line.strip().startswith("```")
    ).strip()
    if remarks:
        entry["remarks"] = _cut(remarks, _REMARKS_LIMIT)
    return entry


async def score_group_rubrics(
    rollout_ids: Sequence[str],
    completions: Sequence[Completion],
    *,
    ground_truth: object,
    question: str,
    judge: Judge,
    rubrics: Sequence[Rubric] = (),
    use_adaptive: bool = False,
    existing_rubrics: Sequence[Rubric] = (),
    cache: RubricCache | None = None,
) -> list[dict[str, float]]:
    """Score a group on static rubrics and, with ``use_adaptive``, on adaptive rubrics.

    The adaptive reward ``rubric_adaptive`` is the mean normalized reward over
    the adaptive rubrics the cache retains for this question.
    """
    _validate_group(rollout_ids, completions)
    keys = _reward_keys(rubrics, allow_empty=use_adaptive)
    texts = [_judged_text(completion) for completion in completions]
    scored = [index for index, text in enumerate(texts) if text]
    rewards = [dict.fromkeys(keys, 0.0) for _ in texts]
    reference = _reference(ground_truth)

    static = [
        (index, key, rubric) for index in scored for key, rubric in zip(keys, rubrics, strict=True)
    ]
    static_evaluations = await evaluate_concurrently(
        ((rubric, texts[index]) for index, _, rubric in static),
        question=question,
        ground_truth=reference,
        judge=judge,
    )
    for (index, key, rubric), evaluation in zip(static, static_evaluations, strict=True):
        rewards[index][key] = rubric.reward_for(evaluation.score)

    if use_adaptive:
        adaptive = await generate_and_cache_adaptive_rubrics(
            question=question,
            ground_truth=reference or "",
            responses=texts,
            judge=judge,
            cache=cache if cache is not None else RubricCache(),
            existing_rubrics=existing_rubrics,
        )
        pairs = [(index, rubric) for index in scored for rubric in adaptive.all]
        adaptive_evaluations = await evaluate_concurrently(
            ((rubric, texts[index]) for index, rubric in pairs),
            question=question,
            ground_truth=reference or "",
            judge=judge,
        )
        per_text: list[list[float]] = [[] for _ in texts]
        for (index, rubric), evaluation in zip(pairs, adaptive_evaluations, strict=True):
            per_text[index].append(rubric.reward_for(evaluation.score))
        for index, values in enumerate(per_text):
            rewards[index][ADAPTIVE_REWARD_KEY] = sum(values) / len(values) if values else 0.0

    for rollout_id, reward_map in zip(rollout_ids, rewards, strict=True):
        logger.info("rubric.scored rollout_id=%s rewards=%s", rollout_id, reward_map)
    return rewards


async def rank_group_rubrics(
    rollout_ids: Sequence[str],
    completions: Sequence[Completion],
    *,
    ground_truth: object,
    question: str,
    judge: Judge,
    rubrics: Sequence[Rubric],
    include_ground_truth: bool = True,
) -> list[dict[str, float]]:
    """Score a group by ranking its completions on each rubric (one judge call per rubric).

    With ``include_ground_truth`` the ground truth is ranked alongside as a reference.
    """
    _validate_group(rollout_ids, completions)
    keys = _reward_keys(rubrics, allow_empty=False)
    texts = [_judged_text(completion) for completion in completions]
    reference = (
        str(ground_truth).strip() if include_ground_truth and ground_truth is not None else ""
    )
    rankings = await gather_or_cancel(
        evaluate_rubric_ranking(
            rubric,
            question=question,
            responses=texts,
            ground_truth=reference or None,
            judge=judge,
            log_result=False,
        )
        for rubric in rubrics
    )
    rewards = [
        {key: ranking.scores[index] for key, ranking in zip(keys, rankings, strict=True)}
        for index in range(len(texts))
    ]
    for rollout_id, reward_map in zip(rollout_ids, rewards, strict=True):
        logger.info("rubric.ranked rollout_id=%s rewards=%s", rollout_id, reward_map)
    return rewards
