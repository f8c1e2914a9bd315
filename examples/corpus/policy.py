"""A mock question writer for ``benchmax generate-qa``: deterministic, offline, plausible.

It reads the passage from the request (between ``<passage>`` tags) and turns simple
sentences into question/answer pairs (``X is the Y.`` -> ``What is the Y?`` / ``X``;
``X was done in 1215.`` -> ``In what year ...?``; ``X has two moons.`` -> ``How many ...``).
Like a real model it sometimes answers in prose the first time, so the retry path runs.

    uv run benchmax generate-qa examples/corpus -o qa \
        --mock-policy examples/corpus/policy.py:reply
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from typing import Any

from benchmax.testing import message_text

_PASSAGE = re.compile(r"<passage>\n(.*)\n</passage>", re.DOTALL)
_PAIRS = re.compile(r"Write up to (\d+) question-answer pairs")
_RETRY = "Your previous reply could not be used"
_SENTENCE = re.compile(r"(?<=[.!?])\s+")

_IDENTITY = re.compile(
    r"^(?P<subject>[A-Z][\w'-]*(?: [\w'-]+){0,3}?) (?P<verb>is|was|are|were) "
    r"(?P<rest>(?:the|a|an) .+?)\.$"
)
_YEAR = re.compile(
    r"^(?P<subject>.+?) (?P<aux>was|were) (?P<rest>[a-z]+(?:ed|en|t)\b.*?),? in "
    r"(?P<year>\d{2,4}(?: BC| AD)?)\.$"
)
_COUNT = re.compile(
    r"^(?P<subject>[A-Z][\w ]*?) has (?P<number>two|three|four|\d+) (?P<noun>\w+)\.$"
)
_SYMBOL = re.compile(r"^(?P<element>[A-Z]\w+) has the chemical symbol (?P<symbol>[A-Z][a-z]?)\.$")


def _lower_first(text: str) -> str:
    return text[0].lower() + text[1:] if text.startswith("The ") else text


_PEOPLE = re.compile(r"\b(person|chemist|astronomer|craftsman|king|queen|explorer|writer)\b")


def _sentences(passage: str) -> Iterator[str]:
    """Sentences of the passage's paragraphs (headings and title lines left out)."""
    for paragraph in re.split(r"\n\s*\n", passage):
        lines = [line for line in paragraph.splitlines() if not line.startswith("#")]
        text = " ".join(" ".join(lines).split())
        if text.endswith((".", "!", "?")):
            yield from _SENTENCE.split(text)


def pairs_in(passage: str) -> Iterator[dict[str, str]]:
    for sentence in _sentences(passage):
        if match := _SYMBOL.match(sentence):
            element, symbol = match["element"], match["symbol"]
            yield {
                "question": f"Which element has the chemical symbol {symbol}?",
                "answer": element,
            }
        elif match := _COUNT.match(sentence):
            subject, noun = match["subject"], match["noun"]
            yield {"question": f"How many {noun} does {subject} have?", "answer": match["number"]}
        elif match := _YEAR.match(sentence):
            subject = _lower_first(match["subject"])
            question = f"In what year {match['aux']} {subject} {match['rest']}?"
            yield {"question": question, "answer": match["year"]}
        elif match := _IDENTITY.match(sentence):
            subject = match["subject"]
            asked = "Who" if _PEOPLE.search(match["rest"]) else "What"
            yield {"question": f"{asked} {match['verb']} {match['rest']}?", "answer": subject}


def reply(body: dict[str, Any]) -> str:
    prompt = message_text(body["messages"][-1]["content"])
    found = _PASSAGE.search(prompt)
    passage = found.group(1) if found else ""
    wanted = _PAIRS.search(prompt)
    limit = int(wanted.group(1)) if wanted else 3
    if _RETRY not in prompt and hashlib.sha256(passage.encode()).digest()[0] % 5 == 0:
        return "Sure! Here are a few questions about the passage you gave me."
    pairs = list(pairs_in(passage))[:limit]
    return json.dumps({"pairs": pairs})
