"""Checks a generated pair must pass: local ones (length, support, trivial retrieval) and
the model's grounding verdict (is the answer supported by the cited chunks?)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from benchmax.datagen._prompts import PASSAGE_CLOSE, PASSAGE_OPEN, QAPair, ReplyShapeError

__all__ = [
    "DROP_REASONS",
    "GroundingVerdict",
    "build_grounding_prompt",
    "local_drop_reason",
    "parse_grounding_reply",
    "repeated_sentence",
]

DROP_REASONS: Final[Mapping[str, str]] = {
    "answer_too_long": "the answer is longer than {max_words} words",
    "answer_not_in_chunk": "the answer is not stated in the passage",
    "trivially_retrievable": (
        "the question repeats a sentence of the passage almost word for word, so it is "
        "found by copying text; rephrase it"
    ),
    "ungrounded": "the passages do not support the answer",
}
"""Reasons a pair is rejected (and asked again once), with the feedback the model gets.
Other drop reasons, not regenerated: ``over_limit`` (more pairs than asked),
``no_related_chunk`` (a multi-hop slot whose chunk has no partner), ``grounding_unchecked``
(the grounding reply was unusable twice), ``duplicate_question``."""

_WORD = re.compile(r"\w+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_MIN_SENTENCE_WORDS = 5


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _longest_common_run(left: Sequence[str], right: Sequence[str]) -> int:
    best = 0
    previous = [0] * (len(right) + 1)
    for word in left:
        current = [0] * (len(right) + 1)
        for position, other in enumerate(right, start=1):
            if word == other:
                current[position] = previous[position - 1] + 1
                best = max(best, current[position])
        previous = current
    return best


def repeated_sentence(question: str, passages: Sequence[str], overlap: float) -> str | None:
    """The sentence of ``passages`` (of five words or more) that ``question`` repeats: the
    longest run of consecutive words they share covers at least ``overlap`` of the
    sentence's words. ``None`` when no sentence is repeated."""
    asked = _words(question)
    for passage in passages:
        for sentence in _SENTENCE.split(passage):
            words = _words(sentence)
            if len(words) < _MIN_SENTENCE_WORDS:
                continue
            if _longest_common_run(asked, words) >= overlap * len(words):
                return sentence.strip()
    return None


def local_drop_reason(
    pair: QAPair,
    passages: Sequence[str],
    *,
    question_type: str,
    max_answer_words: int,
    min_answer_support: float,
    trivial_overlap: float | None,
) -> str | None:
    """The first of ``answer_too_long``, ``answer_not_in_chunk`` (share of the answer's words
    found in ``passages`` below ``min_answer_support``; not checked for ``reasoning``, whose
    answer may be derived) and ``trivially_retrievable`` (``repeated_sentence``; skipped
    when ``trivial_overlap`` is ``None``) that applies, or ``None``."""
    if len(pair.answer.split()) > max_answer_words:
        return "answer_too_long"
    if question_type != "reasoning":
        answer_words = _words(pair.answer)
        known = {word for passage in passages for word in _words(passage)}
        supported = sum(1 for word in answer_words if word in known)
        if not answer_words or supported / len(answer_words) < min_answer_support:
            return "answer_not_in_chunk"
    if trivial_overlap is not None and repeated_sentence(pair.question, passages, trivial_overlap):
        return "trivially_retrievable"
    return None


_GROUNDING = """\
Task: check that answers are supported by passages.

For each numbered question-answer pair below, decide whether the passages alone fully
support the answer: a careful reader of only these passages would give exactly this answer,
either stated outright or following directly from stated facts. Outside knowledge does not
count.

Reply with only a JSON object, without prose or code fences, exactly in this form, one
verdict per pair:
{{"verdicts": [{{"pair": 1, "supported": true, "reason": "..."}}]}}
{passages}
Pairs:
{pairs}"""


def build_grounding_prompt(passages: Sequence[tuple[str, str]], pairs: Sequence[QAPair]) -> str:
    """The request for a verdict per pair; ``passages`` are ``(source, text)``."""
    shown = "".join(
        f"\nFrom {source}:\n{PASSAGE_OPEN}\n{text.strip()}\n{PASSAGE_CLOSE}\n"
        for source, text in passages
    )
    listed = "\n".join(
        f"{number}. question: {json.dumps(pair.question, ensure_ascii=False)} "
        f"answer: {json.dumps(pair.answer, ensure_ascii=False)}"
        for number, pair in enumerate(pairs, start=1)
    )
    return _GROUNDING.format(passages=shown, pairs=listed)


@dataclass(frozen=True, slots=True)
class GroundingVerdict:
    """The model's verdict on one pair: ``supported``, and its ``reason`` (may be empty)."""

    supported: bool
    reason: str = ""


def parse_grounding_reply(reply: Mapping[str, object], count: int) -> list[GroundingVerdict]:
    """One verdict per pair ``1..count`` from ``{"verdicts": [{"pair", "supported",
    "reason"}]}``; ``ReplyShapeError`` saying what is wrong otherwise (a missing pair too)."""
    verdicts = reply.get("verdicts") if isinstance(reply, Mapping) else None
    if not isinstance(verdicts, list):
        raise ReplyShapeError('the object has no "verdicts" list')
    found: dict[int, GroundingVerdict] = {}
    for index, item in enumerate(verdicts):
        if not isinstance(item, Mapping):
            raise ReplyShapeError(f"verdicts[{index}] is not an object")
        number, supported = item.get("pair"), item.get("supported")
        if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= count:
            raise ReplyShapeError(f'verdicts[{index}] needs a "pair" number from 1 to {count}')
        if not isinstance(supported, bool):
            raise ReplyShapeError(f'verdicts[{index}] needs a true or false "supported"')
        reason = item.get("reason")
        found[number] = GroundingVerdict(supported, reason if isinstance(reason, str) else "")
    missing = [number for number in range(1, count + 1) if number not in found]
    if missing:
        raise ReplyShapeError(f"no verdict for pair {missing[0]}")
    return [found[number] for number in range(1, count + 1)]
