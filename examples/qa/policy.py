"""A mock answerer for ``examples/qa``: it has read the example corpus, but not perfectly.

It knows the answers to the questions ``examples/corpus/policy.py`` writes (it derives them
from the same corpus) and answers deterministically with a realistic spread: some questions
always right, some right on alternate rollouts, some never.
"""

from __future__ import annotations

import hashlib
import re
from functools import cache
from pathlib import Path
from typing import Any

from corpus.policy import pairs_in

from benchmax.datagen import read_corpus
from benchmax.testing import RecordedRequest, message_text

CORPUS = Path(__file__).resolve().parent.parent / "corpus"


@cache
def _answers() -> dict[str, str]:
    return {
        pair["question"]: pair["answer"]
        for document in read_corpus(CORPUS)
        for pair in pairs_in(document.text)
    }


def answer(body: dict[str, Any], request: RecordedRequest) -> str:
    question = message_text(body["messages"][-1]["content"])
    truth = _answers().get(question, "I am not sure")
    match = re.search(r"\.r(\d+)$", request.session)
    rollout = int(match.group(1)) if match else 0
    skill = hashlib.sha256(question.encode()).digest()[0] % 3
    if skill == 0 or (skill == 1 and rollout % 2 == 0):
        return f"<answer>{truth}</answer>"
    return "<answer>I am not sure</answer>"
