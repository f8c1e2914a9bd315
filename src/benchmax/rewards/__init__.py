"""Rewards for benchmax environments: LLM-judged rubrics, rankings, adaptive rubrics,
diversity scaling, and judge-free deterministic helpers.

A :class:`Judge` is one serializable value (model, endpoint, auth reference)
shared by every judge-backed reward. Judge failures raise :class:`JudgeError`,
which the environment runtime settles as a ``judge_error`` rollout.
"""

from benchmax.rewards.adaptive import (
    AdaptiveRubrics,
    RubricCache,
    generate_adaptive_rubrics,
    generate_and_cache_adaptive_rubrics,
)
from benchmax.rewards.deterministic import (
    Completion,
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
from benchmax.rewards.diversity import (
    ClusterResult,
    DiversityConfig,
    LLMDiversityConfig,
    NgramDiversityConfig,
    cluster_texts,
    scale_by_diversity,
)
from benchmax.rewards.judge import Judge, JudgeError
from benchmax.rewards.rubric import (
    RankingAnchor,
    Rubric,
    RubricEvaluation,
    RubricPolarity,
    RubricRanking,
    evaluate_rubric_ranking,
    evaluate_single_rubric,
)
from benchmax.rewards.scoring import (
    rank_group_rubrics,
    rubric_reward_key,
    score_group_rubrics,
    score_rubrics,
)

__all__ = [
    "AdaptiveRubrics",
    "ClusterResult",
    "Completion",
    "DiversityConfig",
    "Judge",
    "JudgeError",
    "LLMDiversityConfig",
    "NgramDiversityConfig",
    "RankingAnchor",
    "Rubric",
    "RubricCache",
    "RubricEvaluation",
    "RubricPolarity",
    "RubricRanking",
    "citation_score",
    "clip01",
    "cluster_texts",
    "count_search_calls",
    "evaluate_rubric_ranking",
    "evaluate_single_rubric",
    "extract_answer_block",
    "extract_completion_text",
    "generate_adaptive_rubrics",
    "generate_and_cache_adaptive_rubrics",
    "overlap_reward",
    "percent_of_text_a_in_text_b",
    "rank_group_rubrics",
    "rubric_reward_key",
    "scale_by_diversity",
    "score_group_rubrics",
    "score_rubrics",
    "search_within_budget",
    "tool_call_efficiency",
]
