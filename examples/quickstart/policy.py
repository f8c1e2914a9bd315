"""A scripted mock model for the quick start: deterministic, with a realistic spread.

The mock server passes each request's session, which the runner names after the rollout
(``...r<k>``), so the reply can depend on the question and the rollout's index in its group.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from benchmax.testing import RecordedRequest, message_text

# The mock "knows" these facts and can do two-number arithmetic; anything else it gets wrong.
_FACTS = {
    "capital of france": "Paris",
    "capital of japan": "Tokyo",
    "capital of italy": "Rome",
    "capital of canada": "Ottawa",
    "capital of australia": "Canberra",
    "capital of kenya": "Nairobi",
    "capital of peru": "Lima",
    "capital of norway": "Oslo",
    "largest planet": "Jupiter",
    "red planet": "Mars",
    "chemical symbol for gold": "Au",
    "chemical symbol for iron": "Fe",
    "legs does a spider have": "8",
    "sides does a hexagon have": "6",
    "wrote hamlet": "Shakespeare",
    "painted the mona lisa": "Leonardo da Vinci",
    "freezing point of water in celsius": "0",
    "days are in a leap year": "366",
    "continents are there": "7",
    "author of pride and prejudice": "Jane Austen",
}
_ARITHMETIC = re.compile(r"(\d+)\s*([-+*])\s*(\d+)")


def _truth(question: str) -> str:
    match = _ARITHMETIC.search(question)
    if match:
        left, op, right = int(match.group(1)), match.group(2), int(match.group(3))
        return str({"+": left + right, "-": left - right, "*": left * right}[op])
    return next((v for k, v in _FACTS.items() if k in question.lower()), "I don't know")


def rollout_index(request: RecordedRequest) -> int:
    match = re.search(r"\.r(\d+)$", request.session)
    return int(match.group(1)) if match else 0


def reply(body: dict[str, Any], request: RecordedRequest) -> str:
    question = message_text(body["messages"][-1]["content"])
    truth = _truth(question)
    skill = hashlib.sha256(question.encode()).digest()[0] % 4
    k = rollout_index(request)
    if skill == 0:  # easy: always right
        return f"<answer>{truth}</answer>"
    if skill == 1:  # right, but every other rollout forgets the tags
        return f"<answer>{truth}</answer>" if k % 2 == 0 else f"The answer is {truth}."
    if skill == 2:  # usually right; the second rollout is off
        return f"<answer>{truth}</answer>" if k != 1 else "<answer>not sure</answer>"
    return "<answer>no idea</answer>"  # hard: always wrong
