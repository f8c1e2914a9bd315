"""Question styles (rewritten by the model) and seeded noise (typos, abbreviations)."""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from typing import Final

from benchmax._value_checks import is_non_empty_str
from benchmax.datagen._prompts import ReplyShapeError

__all__ = ["NOISE_KINDS", "add_noise", "build_style_prompt", "parse_style_reply"]

_STYLE_GUIDE: Final[Mapping[str, str]] = {
    "keyword": "a terse search query of the key terms, as typed into a search box, not a sentence",
    "expert": "as a specialist of the field would ask it, in the field's technical vocabulary",
}

_REWRITE = """\
Task: rewrite questions in a given style.

Rewrite each numbered question in the style named before it, keeping its meaning so that
the same answer is still exactly right. Never put the answer into the question.
Styles:
{guide}

Reply with only a JSON object, without prose or code fences, exactly in this form, one
rewritten question per numbered question, in order:
{{"questions": ["..."]}}

Questions:
{questions}"""


def build_style_prompt(questions: Sequence[tuple[str, str]]) -> str:
    """The request to rewrite each ``(style, question)`` (styles ``keyword`` or ``expert``)."""
    used = sorted({style for style, _ in questions})
    return _REWRITE.format(
        guide="\n".join(f"- {style}: {_STYLE_GUIDE[style]}" for style in used),
        questions="\n".join(
            f"{number}. [{style}] {question}"
            for number, (style, question) in enumerate(questions, start=1)
        ),
    )


def parse_style_reply(reply: Mapping[str, object], count: int) -> list[str]:
    """The ``count`` rewritten questions of ``{"questions": [...]}``, whitespace collapsed;
    ``ReplyShapeError`` saying what is wrong otherwise."""
    questions = reply.get("questions") if isinstance(reply, Mapping) else None
    if not isinstance(questions, list) or len(questions) != count:
        raise ReplyShapeError(f'the object needs a "questions" list of {count} strings')
    if not all(is_non_empty_str(question) for question in questions):
        raise ReplyShapeError('every item of "questions" must be a non-empty string')
    return [" ".join(question.split()) for question in questions]


NOISE_KINDS: Final = ("abbreviation", "typo")

_ABBREVIATIONS: Final[Mapping[str, str]] = {
    "and": "&",
    "approximately": "approx.",
    "about": "abt",
    "because": "bc",
    "before": "b4",
    "between": "btwn",
    "century": "c.",
    "department": "dept.",
    "example": "e.g.",
    "government": "govt",
    "information": "info",
    "kilometers": "km",
    "kilometres": "km",
    "minutes": "mins",
    "number": "no.",
    "percent": "%",
    "please": "pls",
    "people": "ppl",
    "temperature": "temp",
    "through": "thru",
    "with": "w/",
    "without": "w/o",
    "year": "yr",
    "years": "yrs",
}
_TOKEN = re.compile(r"[A-Za-z]+")


def _typo(word: str, rng: random.Random) -> str:
    position = rng.randrange(1, len(word) - 2)
    kind = rng.randrange(3)
    if kind == 0:  # two letters swapped
        return word[:position] + word[position + 1] + word[position] + word[position + 2 :]
    if kind == 1:  # a letter dropped
        return word[:position] + word[position + 1 :]
    return word[:position] + word[position] + word[position:]  # a letter doubled


def add_noise(question: str, rng: random.Random) -> tuple[str, tuple[str, ...]]:
    """``question`` with one abbreviation (when a word has a common one) and one typo in a
    word of four letters or more (swapped, dropped or doubled letter), chosen by ``rng``;
    returns the text and the kinds applied, in ``NOISE_KINDS`` order."""
    kinds: list[str] = []
    tokens = list(_TOKEN.finditer(question))
    abbreviable = [m for m in tokens if m.group().lower() in _ABBREVIATIONS]
    if abbreviable:
        match = rng.choice(abbreviable)
        short = _ABBREVIATIONS[match.group().lower()]
        question = question[: match.start()] + short + question[match.end() :]
        kinds.append("abbreviation")
        tokens = list(_TOKEN.finditer(question))
    long_words = [m for m in tokens if len(m.group()) >= 4]
    if long_words:
        match = rng.choice(long_words)
        question = question[: match.start()] + _typo(match.group(), rng) + question[match.end() :]
        kinds.append("typo")
    return question, tuple(kinds)
