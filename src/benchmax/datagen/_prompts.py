"""The question-writing prompt and the checks every reply must pass."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from benchmax._value_checks import is_non_empty_str

__all__ = [
    "PASSAGE_CLOSE",
    "PASSAGE_OPEN",
    "PROMPT_VERSION",
    "QAPair",
    "ReplyShapeError",
    "build_qa_prompt",
    "build_retry_prompt",
    "parse_qa_reply",
]

PROMPT_VERSION = "qa-1"
"""Changes whenever the prompt does, so cached replies to an older prompt are not reused."""

PASSAGE_OPEN = "<passage>"
PASSAGE_CLOSE = "</passage>"

_PROMPT = """\
You write quiz questions that test whether a reader knows the facts in a passage.

Write up to {pairs} question-answer pairs about the passage below.

Rules:
- Each answer must be stated in the passage itself. Do not use outside knowledge.
- Each question must stand on its own: name the subject instead of saying "the passage",
  "the text" or "the author".
- Each answer is short enough to grade by comparison: a name, number, date, term or short
  phrase of at most {max_words} words, with no explanation.
- Ask about different facts. Never ask the same thing twice.
- If the passage holds fewer checkable facts, write fewer pairs (an empty list is fine).

Reply with only a JSON object, without prose or code fences, exactly in this form:
{{"pairs": [{{"question": "...", "answer": "..."}}]}}

The passage comes from {source}:
{open}
{passage}
{close}"""

_RETRY = """\

Your previous reply could not be used: {reason}.
Reply again with only the JSON object in the form given above."""


def build_qa_prompt(passage: str, *, source: str, pairs: int, max_words: int) -> str:
    """The request for up to ``pairs`` pairs about ``passage`` (answers of ``max_words``)."""
    return _PROMPT.format(
        pairs=pairs,
        max_words=max_words,
        source=source,
        open=PASSAGE_OPEN,
        passage=passage.strip(),
        close=PASSAGE_CLOSE,
    )


def build_retry_prompt(prompt: str, reason: str) -> str:
    """``prompt`` again, telling the model why its last reply was refused."""
    return prompt + _RETRY.format(reason=reason)


class ReplyShapeError(ValueError):
    """A reply that is JSON but not ``{"pairs": [{"question", "answer"}, ...]}``."""


@dataclass(frozen=True, slots=True)
class QAPair:
    """One generated question with its answer (the ground truth), stripped."""

    question: str
    answer: str

    def __post_init__(self) -> None:
        if not is_non_empty_str(self.question) or not is_non_empty_str(self.answer):
            raise ValueError("question and answer must be non-empty strings")
        object.__setattr__(self, "question", " ".join(self.question.split()))
        object.__setattr__(self, "answer", " ".join(self.answer.split()))


def parse_qa_reply(reply: Mapping[str, Any]) -> list[QAPair]:
    """The pairs of a decoded reply; ``ReplyShapeError`` saying what is wrong otherwise."""
    pairs = reply.get("pairs") if isinstance(reply, Mapping) else None
    if not isinstance(pairs, list):
        raise ReplyShapeError('the object has no "pairs" list')
    parsed = []
    for index, item in enumerate(pairs):
        if not isinstance(item, Mapping):
            raise ReplyShapeError(f"pairs[{index}] is not an object")
        question, answer = item.get("question"), item.get("answer")
        if isinstance(answer, int | float) and not isinstance(answer, bool):
            answer = str(answer)  # "answer": 8 is a fine answer
        if not is_non_empty_str(question) or not is_non_empty_str(answer):
            raise ReplyShapeError(
                f'pairs[{index}] needs non-empty string "question" and "answer" fields'
            )
        parsed.append(QAPair(question=question, answer=answer))
    return parsed
