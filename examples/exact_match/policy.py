"""A scripted mock model for the exact-match task: deterministic, with a realistic spread.

It computes the answer, then, depending on the question and on the rollout's index in
its group (the runner names each mock session after its rollout, ending in ``r<k>``),
answers exactly, wraps the number in a sentence, or slips by one.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from benchmax.testing import RecordedRequest, message_text

_QUESTION = re.compile(r"(-?\d+)\s*([-+*])\s*(-?\d+)")


def rollout_index(request: RecordedRequest) -> int:
    match = re.search(r"\.r(\d+)$", request.session)
    return int(match.group(1)) if match else 0


def answer(body: dict[str, Any], request: RecordedRequest) -> str:
    question = message_text(body["messages"][-1]["content"])
    match = _QUESTION.search(question)
    if match is None:
        return "I can only do arithmetic."
    left, op, right = int(match.group(1)), match.group(2), int(match.group(3))
    value = {"+": left + right, "-": left - right, "*": left * right}[op]
    seed = hashlib.sha256(question.encode()).digest()[0]
    # A third of the questions get the same treatment in every rollout (no variance).
    style = seed % 5 if seed % 3 == 0 else (seed + rollout_index(request)) % 5
    if style in (0, 1):
        return str(value)  # exact
    if style == 2:
        return f"The answer is {value}."  # right number, not an exact match
    if style == 3:
        return str(value) if op != "*" else str(value + 1)  # multiplication slips
    return f"{value + 1}"  # off by one
