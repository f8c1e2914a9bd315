"""Diversity scaling: cluster sibling answers and divide rewards by cluster size.

Two backends: local character n-gram single-linkage clustering, or semantic
clustering by an LLM judge.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeAlias

from benchmax._value_checks import is_non_empty_str
from benchmax.rewards.judge import Judge, JudgeError
from benchmax.rewards.prompts import DEFAULT_DIVERSITY_INSTRUCTIONS, build_diversity_prompt

__all__ = [
    "ClusterResult",
    "DiversityConfig",
    "LLMDiversityConfig",
    "NgramDiversityConfig",
    "cluster_texts",
    "scale_by_diversity",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class NgramDiversityConfig:
    """Cluster texts whose character n-gram Jaccard similarity reaches the threshold."""

    n: int = 3
    similarity_threshold: float = 0.5

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError("n must be positive")
        if not 0 <= self.similarity_threshold <= 1:
            raise ValueError("similarity_threshold must be within [0, 1]")


@dataclass(frozen=True, slots=True)
class LLMDiversityConfig:
    """Cluster texts by strategy with an LLM judge."""

    judge: Judge
    instructions: str = DEFAULT_DIVERSITY_INSTRUCTIONS
    max_tokens: int = 512
    temperature: float = 0.0

    def __post_init__(self) -> None:
        if not is_non_empty_str(self.instructions):
            raise ValueError("instructions must be non-empty")
        if self.max_tokens < 1:
            raise ValueError("max_tokens must be positive")


DiversityConfig: TypeAlias = NgramDiversityConfig | LLMDiversityConfig


@dataclass(frozen=True, slots=True)
class ClusterResult:
    """Cluster id per text and the size of each text's cluster (its reward divisor)."""

    cluster_ids: tuple[str, ...]
    divisors: tuple[float, ...]
    labels: tuple[str, ...] = ()
    raw_response: str | None = None

    @property
    def n_clusters(self) -> int:
        """Number of distinct clusters."""
        return len(set(self.cluster_ids))


def _ngram_set(text: str, n: int) -> set[str]:
    """Lower-cased character n-grams of ``text`` (the whole text when shorter than ``n``)."""
    clean = text.lower().strip()
    if len(clean) < n:
        return {clean} if clean else set()
    return {clean[i : i + n] for i in range(len(clean) - n + 1)}


def _jaccard(left: set[str], right: set[str]) -> float:
    """Jaccard similarity; two empty sets are identical."""
    if not left and not right:
        return 1.0
    if not left or not right:
        return 0.0
    similarity = len(left & right) / len(left | right)
    if not math.isfinite(similarity):
        raise RuntimeError("jaccard similarity is not finite")
    return similarity


def _ngram_clusters(texts: Sequence[str], config: NgramDiversityConfig) -> ClusterResult:
    grams = [_ngram_set(text, config.n) for text in texts]
    parent = list(range(len(texts)))

    def root(index: int) -> int:
        while parent[index] != index:
            parent[index] = parent[parent[index]]
            index = parent[index]
        return index

    for i in range(len(texts)):
        for j in range(i + 1, len(texts)):
            if _jaccard(grams[i], grams[j]) >= config.similarity_threshold:
                left, right = root(i), root(j)
                if left != right:
                    parent[max(left, right)] = min(left, right)

    numbering: dict[int, str] = {}
    ids = []
    for index in range(len(texts)):
        ids.append(numbering.setdefault(root(index), str(len(numbering))))
    return _with_divisors(tuple(ids))


def _with_divisors(
    ids: tuple[str, ...], labels: tuple[str, ...] = (), raw_response: str | None = None
) -> ClusterResult:
    sizes = Counter(ids)
    return ClusterResult(
        cluster_ids=ids,
        divisors=tuple(float(sizes[cluster]) for cluster in ids),
        labels=labels,
        raw_response=raw_response,
    )


def _parse_assignments(payload: Mapping[str, object], count: int) -> list[tuple[str, str]]:
    assignments = payload.get("assignments")
    if not isinstance(assignments, list):
        raise ValueError("judge response field 'assignments' must be a list")
    assigned: dict[int, tuple[str, str]] = {}
    for item in assignments:
        if not isinstance(item, dict):
            raise ValueError("judge diversity assignments must be objects")
        index = item.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            raise ValueError("judge diversity assignment indices must be integers")
        if not 0 <= index < count:
            raise ValueError(f"judge diversity index {index} is out of range")
        if index in assigned:
            raise ValueError(f"judge diversity assignment repeated index {index}")
        cluster_id = item.get("cluster_id")
        if not is_non_empty_str(cluster_id):
            raise ValueError(f"judge diversity assignment {index} needs a cluster_id")
        label = item.get("label", "")
        if not isinstance(label, str):
            raise ValueError(f"judge diversity assignment {index} label must be a string")
        assigned[index] = (cluster_id.strip(), label.strip())
    missing = sorted(set(range(count)) - assigned.keys())
    if missing:
        raise ValueError(f"judge diversity assignments omitted indices: {missing}")
    return [assigned[index] for index in range(count)]


async def _llm_clusters(
    texts: Sequence[str], config: LLMDiversityConfig, context: str
) -> ClusterResult:
    prompt = build_diversity_prompt(texts, context=context, instructions=config.instructions)
    try:
        payload, raw = await config.judge.request_json(
            prompt,
            request_id="diversity-clustering",
            temperature=config.temperature,
            max_tokens=config.max_tokens,
        )
        assignments = _parse_assignments(payload, len(texts))
    except JudgeError:
        raise
    except Exception as error:
        logger.exception("diversity.clustering_failed")
        raise JudgeError(f"diversity clustering failed: {error}") from error
    return _with_divisors(
        tuple(cluster_id for cluster_id, _ in assignments),
        labels=tuple(label for _, label in assignments),
        raw_response=raw,
    )


async def cluster_texts(
    texts: Sequence[str], config: DiversityConfig, *, context: str = ""
) -> ClusterResult:
    """Cluster ``texts`` with the configured backend (no backend call for fewer than two).

    Texts are compared exactly as given; to compare answers without the models'
    ``<think>`` reasoning, pass ``without_reasoning(extract_completion_text(messages))``
    (:mod:`benchmax.rewards.text`).
    """
    texts = [str(text) for text in texts]
    if not texts:
        return ClusterResult(cluster_ids=(), divisors=())
    if len(texts) == 1:
        return ClusterResult(cluster_ids=("0",), divisors=(1.0,))
    if isinstance(config, NgramDiversityConfig):
        return _ngram_clusters(texts, config)
    return await _llm_clusters(texts, config, context)


async def scale_by_diversity(
    rewards: Sequence[Mapping[str, float]],
    texts: Sequence[str],
    config: DiversityConfig,
    *,
    context: str = "",
) -> tuple[list[dict[str, float]], ClusterResult]:
    """Divide every reward component by the size of its text's cluster."""
    if len(rewards) != len(texts):
        raise ValueError("rewards and texts must have the same length")
    clusters = await cluster_texts(texts, config, context=context)
    scaled = [
        {key: value / divisor for key, value in reward_map.items()}
        for reward_map, divisor in zip(rewards, clusters.divisors, strict=True)
    ]
    return scaled, clusters
