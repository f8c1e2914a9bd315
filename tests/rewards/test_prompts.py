"""Prompt structure: what each builder includes and the JSON shape it asks for."""

from __future__ import annotations

import pytest

from benchmax.rewards import Rubric
from benchmax.rewards import prompts as prompts_module
from benchmax.rewards.prompts import (
    DEFAULT_DIVERSITY_INSTRUCTIONS,
    build_adaptive_rubric_prompt,
    build_diversity_prompt,
    build_rubric_evaluation_prompt,
    build_rubric_ranking_prompt,
    format_rubrics,
)


def test_module_all_lists_the_builders() -> None:
    assert sorted(prompts_module.__all__) == [
        "build_adaptive_rubric_prompt",
        "build_diversity_prompt",
        "build_rubric_evaluation_prompt",
        "build_rubric_ranking_prompt",
    ]


def test_binary_evaluation_prompt() -> None:
    rubric = Rubric("Hallucination", "Invents facts.", polarity="negative")
    prompt = build_rubric_evaluation_prompt(
        rubric, question="Who wrote it?", response="Someone.", ground_truth=" reference "
    )
    for fragment in ("negative", "Hallucination", "Invents facts.", "Who wrote it?", "Someone."):
        assert fragment in prompt
    assert "reference" in prompt
    assert '{"score": <0 or 1>, "reasoning": "<brief explanation>"}' in prompt
    assert "1 when the flaw is clearly present" in prompt


@pytest.mark.parametrize("ground_truth", [None, "", "   "])
def test_evaluation_prompt_omits_blank_ground_truth(ground_truth: str | None) -> None:
    prompt = build_rubric_evaluation_prompt(
        Rubric("q", "d"), question="Q", response="R", ground_truth=ground_truth
    )
    assert "Reference" not in prompt


def test_evaluation_prompt_requires_keyword_ground_truth() -> None:
    with pytest.raises(TypeError):
        build_rubric_evaluation_prompt(Rubric("q", "d"), question="Q", response="R")  # type: ignore[call-arg]


def test_score_map_evaluation_prompt_lists_allowed_scores() -> None:
    rubric = Rubric("Depth", "How deep.", score_map={3: "good", -1: "bad", 1: "okay"})
    prompt = build_rubric_evaluation_prompt(rubric, question="Q", response="R", ground_truth=None)
    assert "- -1.0: bad\n- 1.0: okay\n- 3.0: good" in prompt
    assert "-1.0, 1.0, 3.0" in prompt
    assert '"reasoning"' in prompt


def test_ranking_prompt_lists_items_and_asks_for_tiers() -> None:
    rubric = Rubric("Clarity", "Is clear.")
    prompt = build_rubric_ranking_prompt(rubric, question="Q?", responses=["a", "b", "c"])
    assert "--- Response 0 ---\na\n\n--- Response 1 ---\nb\n\n--- Response 2 ---\nc" in prompt
    for fragment in ("positive", "Clarity", "Is clear.", "Q?", "0 to 2", '"ranking"'):
        assert fragment in prompt
    negative = build_rubric_ranking_prompt(
        Rubric("Flaw", "d", polarity="negative"), question="Q", responses=["a"]
    )
    assert "flaw least" in negative


def test_format_rubrics_sections() -> None:
    assert format_rubrics([]) is None
    rubrics = [
        Rubric("Vague", "Is vague.", polarity="negative"),
        Rubric("Existing", "already covered"),
        Rubric("Other", "more"),
    ]
    assert format_rubrics(rubrics) == (
        "Positive rubrics:\n- Existing: already covered\n- Other: more\n"
        "Negative rubrics:\n- Vague: Is vague."
    )
    assert format_rubrics(rubrics[:1]) == "Negative rubrics:\n- Vague: Is vague."


def test_adaptive_prompt_layout() -> None:
    prompt = build_adaptive_rubric_prompt(
        question="Q?",
        ground_truth="",
        responses=["first", "second"],
        existing_rubrics=[Rubric("Existing", "already covered")],
    )
    assert (
        "Question: Q?\nGround Truth: \nResponses:\nResponse 1:\nfirst\n\nResponse 2:\nsecond"
        "\n\nExisting Rubrics:\nPositive rubrics:\n- Existing: already covered"
    ) in prompt
    assert prompt.index('"positive_rubrics"') < prompt.index("Question: Q?")
    without = build_adaptive_rubric_prompt(question="Q", ground_truth="G", responses=["x"])
    assert "Existing Rubrics:" not in without
    assert without.endswith("Ground Truth: G\nResponses:\nResponse 1:\nx")


def test_diversity_prompt() -> None:
    prompt = build_diversity_prompt(["one", "two"], context="ctx", instructions="  Cluster.  ")
    assert "[0]\none\n\n[1]\ntwo" in prompt
    assert "Cluster." in prompt and "ctx" in prompt and "0 to 1" in prompt
    assert "  Cluster." not in prompt and "Cluster.  " not in prompt  # stripped
    assert '"assignments"' in prompt and '"cluster_id"' in prompt
    assert "(none)" in build_diversity_prompt(["x"])
    assert DEFAULT_DIVERSITY_INSTRUCTIONS.strip() in build_diversity_prompt(["x"])
    assert "null" in DEFAULT_DIVERSITY_INSTRUCTIONS


def test_diversity_prompt_validation() -> None:
    with pytest.raises(ValueError, match="diversity prompt requires at least one text"):
        build_diversity_prompt([])
    with pytest.raises(ValueError, match="diversity instructions must be non-empty"):
        build_diversity_prompt(["x"], instructions=" ")
