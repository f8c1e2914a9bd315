"""Judge-free reward helpers: answer extraction, overlap, citations and tool-call efficiency."""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

from benchmax.rewards.text import message_text, without_reasoning

__all__ = [
    "Completion",
    "citation_score",
    "clip01",
    "count_search_calls",
    "extract_answer_block",
    "extract_completion_text",
    "overlap_reward",
    "percent_of_text_a_in_text_b",
    "search_within_budget",
    "tool_call_efficiency",
]

Completion: TypeAlias = str | Sequence[Mapping[str, object]]
"""Plain completion text, or a chat transcript (a list of message mappings)."""

_ANSWER_BLOCK = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_CITATION = re.compile(r"\[Source:\s*([^\]]+)\]", re.IGNORECASE)
_TOOL_CALL_MARKER = "<tool_call>"


def extract_completion_text(completion: Completion) -> str:
    """The final answer: stripped text, or the last message if it is an assistant's.

    Earlier assistant turns (tool-use history) never count. A message content
    may be a string, ``None`` or a list of parts (read by
    :func:`benchmax.rewards.text.message_text`). Reasoning in ``<think>`` tags
    is kept; :func:`extract_answer_block` is the reader that drops it.
    """
    if isinstance(completion, str):
        return completion.strip()
    if not completion:
        return ""
    last = completion[-1]
    if not isinstance(last, Mapping) or last.get("role") != "assistant":
        return ""
    return message_text(last.get("content")).strip()


def extract_answer_block(text: str) -> str:
    """The stripped content of the first ``<answer>…</answer>`` block, else the stripped text.

    Without a block the whole reply (reasoning left out) is the answer: ``"Paris."`` gives
    ``"Paris."`` and ``"It is Paris, or Lyon"`` gives all of it. Compare the result whole
    (``==`` after normalizing case and punctuation), never with ``in``: a reply listing many
    answers would contain the right one. Reasoning is never the answer: ``<think>…</think>``
    blocks, everything before a lone ``</think>`` and an unclosed ``<think>`` to the end are
    ignored (:func:`benchmax.rewards.text.without_reasoning`).
    """
    text = without_reasoning(text or "")
    match = _ANSWER_BLOCK.search(text)
    return match.group(1).strip() if match else text.strip()


def clip01(value: Any) -> float:
    """``value`` as a float clipped to ``[0, 1]``; unconvertible or non-finite values give 0."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return 0.0
    if not math.isfinite(number):
        return 0.0
    return max(0.0, min(1.0, number))


def percent_of_text_a_in_text_b(text_a: str, text_b: str) -> float:
    """Fraction of ``text_a`` covered by ``difflib`` matching blocks against ``text_b``."""
    if not text_a:
        return 0.0
    matcher = difflib.SequenceMatcher(None, text_a, text_b)
    matched = sum(block.size for block in matcher.get_matching_blocks())
    return matched / len(text_a)


def overlap_reward(
    completion: Completion,
    ground_truth: object,
    *,
    reference_chunks: Sequence[Mapping[str, object]] = (),
    minimum_overlap: float = 0.25,
) -> float:
    """How much of the reference the final answer reproduces; 0 below ``minimum_overlap``."""
    if not 0 <= minimum_overlap <= 1:
        raise ValueError("minimum_overlap must be within [0, 1]")
    if reference_chunks:
        reference = " ".join(str(chunk.get("content", "")) for chunk in reference_chunks)
    else:
        reference = str(ground_truth or "")
    if not reference:
        return 0.0
    score = percent_of_text_a_in_text_b(reference, extract_completion_text(completion))
    return score if score >= minimum_overlap else 0.0


def count_search_calls(completion: Completion) -> int:
    """Number of ``<tool_call>`` markers in the text or in assistant messages."""
    if isinstance(completion, str):
        return completion.count(_TOOL_CALL_MARKER)
    total = 0
    for message in completion:
        if not isinstance(message, Mapping) or message.get("role") != "assistant":
            continue
        total += message_text(message.get("content")).count(_TOOL_CALL_MARKER)
    return total


def search_within_budget(calls: int, max_calls: int) -> bool:
    """Whether ``calls`` does not exceed ``max_calls``."""
    if calls < 0 or max_calls < 0:
        raise ValueError("calls and max_calls must be non-negative")
    return calls <= max_calls


def _chunk_source(
    chunk: Mapping[str, object], fields: tuple[str, ...], normalize: Callable[[str], str]
) -> str:
    metadata = chunk.get("metadata")
    if not isinstance(metadata, Mapping):
        return ""
    for name in fields:
        value = metadata.get(name)
        if value is not None and str(value).strip():
            return normalize(str(value))
    return ""


def citation_score(
    completion: Completion,
    reference_chunks: Sequence[Mapping[str, object]],
    *,
    source_field: str | Sequence[str] = "source_id",
    canonicalize: Callable[[str], str] | None = None,
) -> dict[str, float]:
    """Precision and recall of ``[Source: id]`` citations against the chunks' source ids."""
    fields = (source_field,) if isinstance(source_field, str) else tuple(source_field)
    if not fields:
        raise ValueError("source_field must contain at least one field")
    normalize = canonicalize or str.strip
    text = extract_completion_text(completion)
    cited = {normalize(match) for match in _CITATION.findall(text)} - {""}
    references = {_chunk_source(chunk, fields, normalize) for chunk in reference_chunks} - {""}
    if not cited or not references:
        return {"precision": 0.0, "recall": 0.0}
    matches = cited & references
    return {"precision": len(matches) / len(cited), "recall": len(matches) / len(references)}


def tool_call_efficiency(
    completion: Completion,
    *,
    correctness: float = 1.0,
    reference_chunk_count: int = 0,
    max_calls: int = 10,
    decay_rate: float = 0.2,
    ranges: Sequence[tuple[int, int | None, float]] | None = None,
) -> float:
    """Reward for economical tool use.

    With ``ranges``, the score of the first ``(minimum, maximum, score)`` range
    containing the call count. Otherwise ``correctness`` decays exponentially
    with each call beyond ``reference_chunk_count + 2`` and is 0 above
    ``max_calls``.
    """
    if reference_chunk_count < 0 or max_calls < 0 or not decay_rate >= 0:  # NaN is refused too
        raise ValueError("counts and decay_rate must be non-negative")
    calls = count_search_calls(completion)
    if ranges is not None:
        for minimum, maximum, score in ranges:
            if minimum < 0 or (maximum is not None and maximum < minimum):
                raise ValueError("tool-call ranges must be ordered and non-negative")
            if minimum <= calls and (maximum is None or calls <= maximum):
                return clip01(score)
        return 0.0
    correct = clip01(correctness)
    if correct == 0 or calls > max_calls:
        return 0.0
    excess = calls - (reference_chunk_count + 2)
    if excess <= 0:
        return correct  # also keeps an infinite decay_rate from giving 0 * inf = NaN
    return correct * math.exp(-decay_rate * excess)
