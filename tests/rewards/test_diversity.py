"""Diversity: configurations, n-gram and LLM clustering, reward scaling."""

from __future__ import annotations

import json
import pickle
from typing import Any

import cloudpickle
import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmax.auth import InjectedAuth, StaticBearerAuth
from benchmax.rewards import (
    ClusterResult,
    Judge,
    JudgeError,
    LLMDiversityConfig,
    NgramDiversityConfig,
    cluster_texts,
    scale_by_diversity,
)
from benchmax.rewards.diversity import _jaccard, _ngram_set
from benchmax.rewards.prompts import DEFAULT_DIVERSITY_INSTRUCTIONS


def assignments(*items: dict[str, Any]) -> str:
    return json.dumps({"assignments": list(items)})


# --- configurations ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"n": 0}, "n must be positive"),
        ({"similarity_threshold": 2}, r"similarity_threshold must be within \[0, 1\]"),
        ({"similarity_threshold": -0.1}, r"\[0, 1\]"),
        ({"similarity_threshold": float("nan")}, r"\[0, 1\]"),
        ({"n": 0, "similarity_threshold": 2}, "n must be positive"),  # n is checked first
    ],
)
def test_ngram_config_validation(kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        NgramDiversityConfig(**kwargs)


def test_llm_config_validation_and_defaults(judge: Judge) -> None:
    config = LLMDiversityConfig(judge=judge)
    assert (config.instructions, config.max_tokens, config.temperature) == (
        DEFAULT_DIVERSITY_INSTRUCTIONS,
        512,
        0.0,
    )
    with pytest.raises(ValueError, match="instructions must be non-empty"):
        LLMDiversityConfig(judge=judge, instructions=" ")
    with pytest.raises(ValueError, match="max_tokens must be positive"):
        LLMDiversityConfig(judge=judge, max_tokens=0)


@pytest.mark.parametrize("dumps", [pickle.dumps, cloudpickle.dumps])
@pytest.mark.parametrize("auth", [InjectedAuth("judge"), StaticBearerAuth("t")])
def test_configs_pickle_with_fields_intact(dumps: Any, auth: Any) -> None:
    judge = Judge(model="m", base_url="http://j/v1", auth=auth)
    llm = LLMDiversityConfig(judge=judge, instructions="group", max_tokens=64, temperature=0.3)
    ngram = NgramDiversityConfig(n=2, similarity_threshold=0.7)
    assert pickle.loads(dumps(llm)) == llm
    assert pickle.loads(dumps(llm)).judge == judge
    assert pickle.loads(dumps(ngram)) == ngram


def test_llm_config_repr_hides_the_judge_token() -> None:
    judge = Judge(model="m", base_url="http://j/v1", auth=StaticBearerAuth("top-secret"))
    assert "top-secret" not in repr(LLMDiversityConfig(judge=judge))


# --- n-gram helpers --------------------------------------------------------------------


def test_ngram_set_and_jaccard_examples() -> None:
    assert _ngram_set("Abcd", 2) == {"ab", "bc", "cd"}
    assert _ngram_set("", 3) == set()
    assert _ngram_set("  ", 3) == set()
    assert _ngram_set("ab", 3) == {"ab"}
    assert _jaccard({"a", "b"}, {"b", "c"}) == pytest.approx(1 / 3)
    assert _jaccard(set(), set()) == 1.0
    assert _jaccard({"a"}, set()) == 0.0


@given(st.text(alphabet="abcXYZ \t", max_size=20), st.integers(1, 4))
def test_ngram_set_properties(text: str, n: int) -> None:
    grams = _ngram_set(text, n)
    clean = text.lower().strip()
    assert all(gram in clean for gram in grams)
    if len(clean) >= n:
        assert all(len(gram) == n for gram in grams)
    else:
        assert grams == ({clean} if clean else set())
    assert _ngram_set(text.upper(), n) == grams == _ngram_set(f" {text} ", n)


@given(st.sets(st.text(max_size=2), max_size=6), st.sets(st.text(max_size=2), max_size=6))
def test_jaccard_is_symmetric_and_bounded(left: set[str], right: set[str]) -> None:
    value = _jaccard(left, right)
    assert value == _jaccard(right, left)
    assert 0.0 <= value <= 1.0
    assert _jaccard(left, left) == 1.0


# --- n-gram clustering ------------------------------------------------------------------


async def test_ngram_clustering_is_single_linkage() -> None:
    result = await cluster_texts(
        ["ab", "abc", "bc"], NgramDiversityConfig(n=1, similarity_threshold=0.6)
    )
    assert result.cluster_ids == ("0", "0", "0")
    assert result.divisors == (3.0, 3.0, 3.0)
    assert (result.labels, result.raw_response, result.n_clusters) == ((), None, 1)


async def test_ngram_cluster_ids_follow_smallest_member() -> None:
    result = await cluster_texts(["zzzz", "aaaa", "zzzz", "bbbb", "aaaa"], NgramDiversityConfig())
    assert result.cluster_ids == ("0", "1", "0", "2", "1")
    assert result.divisors == (2.0, 2.0, 2.0, 1.0, 2.0)
    assert result.n_clusters == 3


async def test_threshold_zero_joins_everything_identical_always_join() -> None:
    everything = await cluster_texts(["x", "y", "z"], NgramDiversityConfig(similarity_threshold=0))
    assert everything.divisors == (3.0, 3.0, 3.0)
    same = await cluster_texts(["same", "same"], NgramDiversityConfig(similarity_threshold=1))
    assert same.cluster_ids == ("0", "0")


async def test_empty_and_single_inputs_skip_the_backend(stub_judge, judge) -> None:
    config = LLMDiversityConfig(judge=judge)
    assert await cluster_texts([], config) == ClusterResult(cluster_ids=(), divisors=())
    single = await cluster_texts(["only"], config)
    assert single == ClusterResult(cluster_ids=("0",), divisors=(1.0,))
    assert await cluster_texts(["only"], NgramDiversityConfig()) == single
    assert stub_judge.requests == []


@given(st.lists(st.text(alphabet="abc ", max_size=6), min_size=2, max_size=7), st.floats(0, 1))
async def test_ngram_clusters_are_consistent(texts: list[str], threshold: float) -> None:
    result = await cluster_texts(texts, NgramDiversityConfig(n=2, similarity_threshold=threshold))
    ids = result.cluster_ids
    assert len(ids) == len(texts)
    # ids are numbered by first appearance
    first_seen = list(dict.fromkeys(ids))
    assert first_seen == [str(i) for i in range(len(first_seen))]
    for i, cluster in enumerate(ids):
        assert result.divisors[i] == float(ids.count(cluster))
    # every similar pair shares a cluster
    grams = [_ngram_set(text, 2) for text in texts]
    for i in range(len(texts)):
        for j in range(i + 1, len(texts)):
            if _jaccard(grams[i], grams[j]) >= threshold:
                assert ids[i] == ids[j]


# --- scale_by_diversity ------------------------------------------------------------------


async def test_scale_by_diversity_divides_by_cluster_size() -> None:
    rewards = [{"a": 1.0, "b": 0.5}, {"a": 0.8, "b": 0.4}, {"a": 1.0}]
    scaled, clusters = await scale_by_diversity(
        rewards, ["same", "same", "different"], NgramDiversityConfig(similarity_threshold=0.9)
    )
    assert scaled == [{"a": 0.5, "b": 0.25}, {"a": 0.4, "b": 0.2}, {"a": 1.0}]
    assert list(scaled[0]) == ["a", "b"]
    assert clusters.cluster_ids[0] == clusters.cluster_ids[1] != clusters.cluster_ids[2]


async def test_scale_by_diversity_single_text_unscaled() -> None:
    scaled, _ = await scale_by_diversity([{"a": 0.7}], ["x"], NgramDiversityConfig())
    assert scaled == [{"a": 0.7}]


async def test_scale_by_diversity_length_mismatch(stub_judge, judge) -> None:
    with pytest.raises(ValueError, match="rewards and texts must have the same length"):
        await scale_by_diversity([{"a": 1.0}], ["x", "y"], LLMDiversityConfig(judge=judge))
    assert stub_judge.requests == []


def test_scale_by_diversity_importable_from_both_places() -> None:
    from benchmax import rewards
    from benchmax.rewards import diversity

    assert rewards.scale_by_diversity is diversity.scale_by_diversity


# --- LLM clustering ------------------------------------------------------------------------


async def test_texts_are_converted_with_str() -> None:
    result = await cluster_texts([12, 12, "other"], NgramDiversityConfig())  # type: ignore[list-item]
    assert result.cluster_ids == ("0", "0", "1")


async def test_llm_clustering_returns_judge_ids_labels_and_divisors(
    stub_judge, judge, judge_calls
) -> None:
    stub_judge.script(
        assignments(
            {"index": 1, "cluster_id": " same ", "label": " shared "},
            {"index": 0, "cluster_id": "same", "label": "shared"},
        )
    )
    config = LLMDiversityConfig(judge=judge, instructions="  Group by method.  ", max_tokens=99)
    result = await cluster_texts(["one", "two"], config, context="Solve x")
    assert result.cluster_ids == ("same", "same")
    assert result.labels == ("shared", "shared")
    assert result.divisors == (2.0, 2.0)
    assert result.raw_response is not None and "assignments" in result.raw_response
    prompt = stub_judge.prompts[0]
    assert "Group by method." in prompt and "[0]\none" in prompt and "[1]\ntwo" in prompt
    assert "Solve x" in prompt
    request = stub_judge.requests[0]
    assert request["max_tokens"] == 99 and request["temperature"] == 0.0
    assert judge_calls == [
        {"request_id": "diversity-clustering", "temperature": 0.0, "max_tokens": 99}
    ]


async def test_llm_clustering_label_defaults_and_ids_are_not_renumbered(stub_judge, judge):
    stub_judge.script(assignments({"index": 0, "cluster_id": "b"}, {"index": 1, "cluster_id": "a"}))
    result = await cluster_texts(["x", "y"], LLMDiversityConfig(judge=judge))
    assert result.cluster_ids == ("b", "a")
    assert result.labels == ("", "")
    assert "(none)" in stub_judge.prompts[0]
    assert stub_judge.requests[0]["max_tokens"] == 512


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        ({"assignments": {}}, "judge response field 'assignments' must be a list"),
        ({}, "'assignments' must be a list"),
        ({"assignments": ["x"]}, "judge diversity assignments must be objects"),
        ({"assignments": [{"index": "0"}]}, "judge diversity assignment indices must be integers"),
        ({"assignments": [{"index": False}]}, "indices must be integers"),
        (
            {"assignments": [{"index": 2, "cluster_id": "a"}]},
            "judge diversity index 2 is out of range",
        ),
        (
            {"assignments": [{"index": 0, "cluster_id": "a"}, {"index": 0, "cluster_id": "a"}]},
            "judge diversity assignment repeated index 0",
        ),
        ({"assignments": [{"index": 0, "cluster_id": " "}]}, "assignment 0 needs a cluster_id"),
        (
            {"assignments": [{"index": 1, "cluster_id": "a", "label": 3}]},
            "judge diversity assignment 1 label must be a string",
        ),
        (
            {"assignments": [{"index": 1, "cluster_id": "a"}]},
            r"judge diversity assignments omitted indices: \[0\]",
        ),
    ],
)
async def test_llm_assignment_errors(stub_judge, judge, payload: dict, fragment: str) -> None:
    stub_judge.script(json.dumps(payload))
    with pytest.raises(JudgeError, match=fragment) as raised:
        await cluster_texts(["x", "y"], LLMDiversityConfig(judge=judge))
    assert str(raised.value).startswith("diversity clustering failed: ")


async def test_llm_judge_error_propagates_unchanged(stub_judge, judge) -> None:
    stub_judge.script("")
    with pytest.raises(JudgeError, match=r"^judge request failed: judge returned an empty"):
        await cluster_texts(["x", "y"], LLMDiversityConfig(judge=judge))


async def test_llm_scaling_uses_judge_clusters(stub_judge, judge) -> None:
    stub_judge.script(
        assignments(
            {"index": 0, "cluster_id": "dup"},
            {"index": 1, "cluster_id": "dup"},
            {"index": 2, "cluster_id": "solo"},
        )
    )
    scaled, _ = await scale_by_diversity(
        [{"r": 1.0}, {"r": 1.0}, {"r": 1.0}], ["a", "b", "c"], LLMDiversityConfig(judge=judge)
    )
    assert scaled == [{"r": 0.5}, {"r": 0.5}, {"r": 1.0}]
