"""Judge prompt construction for rubric evaluation, ranking, generation and clustering.

The wording here is ours; the structure (what each prompt includes and the JSON
shape it asks for) is what the parsers in the other reward modules rely on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

__all__ = [
    "build_adaptive_rubric_prompt",
    "build_diversity_prompt",
    "build_rubric_evaluation_prompt",
    "build_rubric_ranking_prompt",
]

DEFAULT_DIVERSITY_INSTRUCTIONS = (
    "Group the entries by the strategy or approach each one takes, not by its wording. "
    "Entries that say the same thing in different words follow one strategy and belong "
    "to the same cluster. Put every blank entry and every refusal together in a single "
    'shared cluster with the id "null".'
)


class _Criterion(Protocol):
    """What these prompts read of a rubric (``benchmax.rewards.rubric.Rubric`` has it): a
    protocol, so this module does not import the module that imports it."""

    @property
    def title(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def polarity(self) -> str: ...

    @property
    def score_map(self) -> Mapping[float, str] | None: ...

    @property
    def allowed_scores(self) -> tuple[float, ...]: ...


def _criterion_block(rubric: _Criterion) -> str:
    if rubric.polarity == "positive":
        meaning = "a quality that a good response shows"
    else:
        meaning = "a flaw that a good response avoids"
    return (
        f"Criterion polarity: {rubric.polarity} ({meaning})\n"
        f"Criterion title: {rubric.title}\n"
        f"Criterion description: {rubric.description}"
    )


def build_rubric_evaluation_prompt(
    rubric: _Criterion, *, question: str, response: str, ground_truth: str | None
) -> str:
    """A prompt asking the judge to score one response against one rubric."""
    sections = [
        "You are grading one response against a single criterion. "
        "Judge only this criterion and ignore every other aspect of the response.",
        _criterion_block(rubric),
        f"Question:\n{question}",
    ]
    sections.extend(_reference_sections(ground_truth))
    sections.append(f"Response to grade:\n{response}")
    sections.extend(_scoring_sections(rubric, "the response"))
    return "\n\n".join(sections)


def _reference_sections(ground_truth: str | None) -> list[str]:
    """The reference answer as an optional aid (none for a missing or blank one)."""
    reference = str(ground_truth or "").strip()
    if not reference:
        return []
    return [
        "Reference answer (optional aid; use it to check correctness or completeness "
        f"when the criterion calls for it):\n{reference}"
    ]


def _scoring_sections(rubric: _Criterion, graded: str) -> list[str]:
    """How to score ``graded`` (``"the response"``, ...) on ``rubric`` and the JSON to reply."""
    if rubric.score_map is None:
        return [
            "Scoring:\n"
            f"- For a positive criterion, answer 1 when {graded} clearly shows the quality "
            "and 0 when it does not.\n"
            "- For a negative criterion, answer 1 when the flaw is clearly present in "
            f"{graded} and 0 when it is absent.",
            "Reply with only this JSON object and nothing else:\n"
            '{"score": <0 or 1>, "reasoning": "<brief explanation>"}',
        ]
    allowed = rubric.allowed_scores
    described = sorted((float(key), text) for key, text in rubric.score_map.items())
    lines = [f"- {score}: {text}" for score, text in described]
    choices = ", ".join(str(score) for score in allowed)
    return [
        "Allowed scores (use exactly one of these values):\n" + "\n".join(lines),
        "Reply with only this JSON object and nothing else:\n"
        f'{{"score": <one of {choices}>, "reasoning": "<brief explanation>"}}',
    ]


def build_rubric_trajectory_prompt(
    rubric: _Criterion, *, question: str, transcript: str, ground_truth: str | None
) -> str:
    """A prompt asking the judge to score a whole conversation (a transcript rendered by
    :func:`benchmax.rewards.transcript.render_transcript`) against one rubric."""
    sections = [
        "You are grading one conversation between an AI assistant and a user against a "
        "single criterion. The transcript shows every message in order: the user's "
        "messages, the assistant's replies, the tools the assistant called with their "
        "arguments, and what each tool returned. Judge the assistant's conduct over the "
        "whole conversation on this criterion only and ignore every other aspect; the "
        "tool results are what the assistant could rely on.",
        _criterion_block(rubric),
        f"Task:\n{question}",
    ]
    sections.extend(_reference_sections(ground_truth))
    sections.append(
        "Conversation to grade (one [role] block per message; long parts are cut where "
        f"marked):\n{transcript}"
    )
    sections.extend(_scoring_sections(rubric, "the assistant's conduct"))
    return "\n\n".join(sections)


def build_rubric_ranking_prompt(
    rubric: _Criterion, *, question: str, responses: Sequence[str]
) -> str:
    """A prompt asking the judge to rank responses (ties allowed) on one rubric."""
    last = len(responses) - 1
    if rubric.polarity == "positive":
        best = "the response that shows the quality most strongly"
    else:
        best = "the response that shows the flaw least"
    items = "\n\n".join(f"--- Response {i} ---\n{text}" for i, text in enumerate(responses))
    return "\n\n".join(
        [
            "You are comparing several responses on a single criterion. "
            "Judge only this criterion and ignore every other aspect of the responses.",
            _criterion_block(rubric),
            f"Question:\n{question}",
            f"Responses:\n\n{items}",
            "Instructions:\n"
            f"- Order the responses from best to worst on this criterion; best means {best}.\n"
            "- Responses that are equally good on this criterion form one tier: list their "
            "indices together in the same inner list.\n"
            f"- Use every index from 0 to {last} exactly once.\n"
            "- If all responses are equivalent, return a single tier that contains every index.",
            "Reply with only this JSON object and nothing else:\n"
            '{"ranking": [[<indices of the best tier>], ..., [<indices of the worst tier>]], '
            '"reasoning": "<brief explanation>"}',
        ]
    )


def format_rubrics(rubrics: Sequence[_Criterion]) -> str | None:
    """Rubrics as ``Positive rubrics:``/``Negative rubrics:`` sections, or ``None``."""
    lines: list[str] = []
    for polarity, heading in (("positive", "Positive rubrics:"), ("negative", "Negative rubrics:")):
        section = [r for r in rubrics if r.polarity == polarity]
        if section:
            lines.append(heading)
            lines.extend(f"- {r.title}: {r.description}" for r in section)
    return "\n".join(lines) if lines else None


def build_adaptive_rubric_prompt(
    *,
    question: str,
    ground_truth: str,
    responses: Sequence[str],
    existing_rubrics: Sequence[_Criterion] = (),
) -> str:
    """A prompt asking the judge for new rubrics that separate the given responses."""
    instructions = (
        "You write grading rubrics. Study the question and the candidate responses below, "
        "then propose between 1 and 5 rubrics that discriminate: each should separate the "
        "better responses from the worse ones among those shown. Keep rubrics distinct from "
        "each other and from the existing rubrics; do not propose a negative rubric that "
        "merely mirrors a positive one. If the existing rubrics already capture every "
        "meaningful difference, return empty lists. When a ground truth is given, treat it "
        "as the reference for correctness and completeness.\n\n"
        "Positive rubrics describe qualities of better responses; negative rubrics describe "
        "flaws of worse responses.\n\n"
        "Reply with only a JSON object of this shape:\n"
        '{"question": "...", "positive_rubrics": [{"description": "...", "title": "..."}], '
        '"negative_rubrics": [{"description": "...", "title": "..."}]}'
    )
    numbered = "\n\n".join(f"Response {i}:\n{text}" for i, text in enumerate(responses, start=1))
    prompt = (
        f"{instructions}\n\n"
        f"Question: {question}\n"
        f"Ground Truth: {ground_truth}\n"
        f"Responses:\n{numbered}"
    )
    existing = format_rubrics(existing_rubrics)
    if existing is not None:
        prompt += f"\n\nExisting Rubrics:\n{existing}"
    return prompt


def build_diversity_prompt(
    texts: Sequence[str],
    *,
    context: str = "",
    instructions: str = DEFAULT_DIVERSITY_INSTRUCTIONS,
) -> str:
    """A prompt asking the judge to assign every text to a cluster."""
    if not texts:
        raise ValueError("diversity prompt requires at least one text")
    if not isinstance(instructions, str) or not instructions.strip():
        raise ValueError("diversity instructions must be non-empty")
    last = len(texts) - 1
    items = "\n\n".join(f"[{i}]\n{text}" for i, text in enumerate(texts))
    return "\n\n".join(
        [
            "You are clustering a set of entries.",
            f"Context:\n{context or '(none)'}",
            f"Clustering instructions:\n{instructions.strip()}",
            f"Assign each entry to exactly one cluster. Every index from 0 to {last} must "
            "appear exactly once in your answer.",
            f"Entries:\n\n{items}",
            "Reply with only this JSON object and nothing else:\n"
            '{"assignments": [{"index": 0, "cluster_id": "<short id>", '
            '"label": "<description>"}]}',
        ]
    )
