"""The question-writing prompt and the checks every reply must pass."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from benchmax._value_checks import is_non_empty_str
from benchmax.datagen._errors import DatagenError

__all__ = [
    "PASSAGE_CLOSE",
    "PASSAGE_OPEN",
    "PROMPT_VERSION",
    "QAPair",
    "ReplyShapeError",
    "build_feedback_prompt",
    "build_qa_prompt",
    "build_retry_prompt",
    "parse_qa_reply",
]

PROMPT_VERSION = "qa-2"
"""Changes whenever the prompt does, so cached replies to an older prompt are not reused."""

PASSAGE_OPEN = "<passage>"
PASSAGE_CLOSE = "</passage>"

_PROMPT = """\
You write quiz questions that test whether a reader knows the facts in {what}.

Write up to {pairs} question-answer pairs {kind}.

Rules:
{type_rules}\
- Each question must stand on its own: name the subject instead of saying "the passage",
  "the text" or "the author".
- Rephrase: do not copy a sentence of the passage into the question.
- Each answer is short enough to grade by comparison: a name, number, date, term or short
  phrase of at most {max_words} words, with no explanation.
- Ask about different facts. Never ask the same thing twice.
- If the passage holds fewer checkable facts, write fewer pairs (an empty list is fine).

Reply with only a JSON object, without prose or code fences, exactly in this form:
{{"pairs": [{{"question": "...", "answer": "..."}}]}}
{passages}"""

_TYPE_RULES = {
    "lookup": (
        "the passage below",
        "about the passage below (question type: lookup)",
        "- Each answer must be stated in the passage itself. Do not use outside knowledge.\n",
    ),
    "multi_hop": (
        "two related passages",
        "that each need facts from BOTH passages below (question type: multi-hop)",
        "- Each question must combine a fact of the first passage with a fact of the second\n"
        "  (link an entity of one to a fact of the other, or compare the two); a question\n"
        "  answered by one passage alone does not count.\n"
        "- Every fact used must be stated in the passages. Do not use outside knowledge.\n",
    ),
    "reasoning": (
        "the passage below",
        "that need a short chain of reasoning over the passage below (question type: reasoning)",
        "- Each question must need two or more facts of the passage put together: a\n"
        "  comparison, an order, a count, a difference of dates or numbers, or an inference.\n"
        "- The answer must follow from the passage alone. Do not use outside knowledge.\n",
    ),
}

_PASSAGE = """
The passage comes from {source}:
{open}
{passage}
{close}"""

_RETRY = """\

Your previous reply could not be used: {reason}.
Reply again with only the JSON object in the form given above."""

_FEEDBACK = """\

Some pairs you wrote for this request were rejected:
{rejections}
Write up to {pairs} new pairs instead that avoid these problems, in the same JSON form."""


def build_qa_prompt(
    passage: str,
    *,
    source: str,
    pairs: int,
    max_words: int,
    question_type: str = "lookup",
    linked: tuple[str, str] | None = None,
) -> str:
    """The request for up to ``pairs`` pairs of ``question_type`` about ``passage``
    (answers of ``max_words``); a multi-hop request also shows ``linked``
    (``(source, passage)`` of the related chunk)."""
    what, kind, rules = _TYPE_RULES[question_type]
    shown = [(source, passage), *([linked] if linked is not None else [])]
    return _PROMPT.format(
        what=what,
        pairs=pairs,
        kind=kind,
        type_rules=rules,
        max_words=max_words,
        passages="".join(
            _PASSAGE.format(
                source=name, open=PASSAGE_OPEN, passage=text.strip(), close=PASSAGE_CLOSE
            )
            for name, text in shown
        ),
    )


def build_retry_prompt(prompt: str, reason: str) -> str:
    """``prompt`` again, telling the model why its last reply was refused."""
    return prompt + _RETRY.format(reason=reason)


def build_feedback_prompt(prompt: str, rejections: Sequence[tuple[QAPair, str]]) -> str:
    """``prompt`` again, listing each rejected pair with why, asking for as many new ones."""
    listed = "\n".join(
        f"- {json.dumps(pair.question, ensure_ascii=False)} -> "
        f"{json.dumps(pair.answer, ensure_ascii=False)}: {reason}"
        for pair, reason in rejections
    )
    prompt = _WRITE_UP_TO.sub(f"Write up to {len(rejections)} ", prompt, count=1)
    return prompt + _FEEDBACK.format(rejections=listed, pairs=len(rejections))


_WRITE_UP_TO = re.compile(r"^Write up to \d+ ", re.MULTILINE)


class ReplyShapeError(DatagenError, ValueError):
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


def parse_qa_reply(reply: Mapping[str, object]) -> list[QAPair]:
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
