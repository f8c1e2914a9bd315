"""A mock answerer for ``examples/qa``: it has read the example corpus, but not perfectly.

It knows the answers to the questions ``examples/corpus/policy.py`` writes (it derives them
from the same corpus; styled and noisy questions it does not recognize) and answers
deterministically with a realistic spread: some questions always right, some right on
alternate rollouts, some never.
"""

from __future__ import annotations

import hashlib
import re
from functools import cache
from pathlib import Path
from typing import Any

from corpus.policy import known_answers

from benchmax.datagen import read_corpus
from benchmax.testing import RecordedRequest, message_text

CORPUS = Path(__file__).resolve().parent.parent / "corpus"


@cache
def _answers() -> dict[str, str]:
    return known_answers([document.text for document in read_corpus(CORPUS)])


def _truth(question: str) -> str:
    """The answer, also to a multi-hop question joining two known ones with ", and"."""
    known = _answers()
    if question in known:
        return known[question]
    first, _, second = question.partition(", and ")
    one, other = known.get(f"{first}?"), known.get(second[:1].upper() + second[1:])
    return f"{one} and {other}" if one and other else "I am not sure"


def answer(body: dict[str, Any], request: RecordedRequest) -> str:
    question = message_text(body["messages"][-1]["content"])
    truth = _truth(question)
    match = re.search(r"\.r(\d+)$", request.session)
    rollout = int(match.group(1)) if match else 0
    skill = hashlib.sha256(question.encode()).digest()[0] % 3
    if skill == 0 or (skill == 1 and rollout % 2 == 0):
        return f"<answer>{truth}</answer>"
    return "<answer>I am not sure</answer>"
