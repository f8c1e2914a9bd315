"""A scripted mock model for the calculator task: deterministic, several behaviors.

Each rollout follows one strategy, chosen from the question and the rollout's index in
its group (the runner names each mock session after its rollout, ending in ``r<k>``):

* ``careful``: ``add`` then ``multiply`` with the tool results, then the answer;
* ``guesser``: answers at once, ignoring parentheses (usually wrong, no tools);
* ``confused``: calls a tool that does not exist, then computes it correctly itself;
* ``looper``: keeps calling ``add`` and runs out of turns (``max_turns_exceeded``).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from benchmax.testing import RecordedRequest, message_text

_NUMBERS = re.compile(r"\((-?\d+) \+ (-?\d+)\) \* (-?\d+)")
_STRATEGIES = ("careful", "careful", "guesser", "confused", "careful", "looper")


def rollout_index(request: RecordedRequest) -> int:
    match = re.search(r"\.r(\d+)$", request.session)
    return int(match.group(1)) if match else 0


def _call(name: str, a: int, b: int) -> dict[str, Any]:
    return {"content": None, "tool_calls": [{"name": name, "arguments": {"a": a, "b": b}}]}


def solve(body: dict[str, Any], request: RecordedRequest) -> dict[str, Any] | str:
    messages = body["messages"]
    question = next(message_text(m["content"]) for m in messages if m["role"] == "user")
    match = _NUMBERS.search(question)
    if match is None:
        return "<answer>0</answer>"
    a, b, c = (int(group) for group in match.groups())
    seed = hashlib.sha256(question.encode()).digest()[0]
    # A third of the questions are easy: every rollout is careful (no reward variance).
    position = 0 if seed % 3 == 0 else seed + rollout_index(request)
    strategy = _STRATEGIES[position % len(_STRATEGIES)]
    results = [
        json.loads(m["content"])["result"]
        for m in messages
        if m["role"] == "tool" and str(m["content"]).startswith("{")
    ]
    turn = sum(1 for m in messages if m["role"] == "assistant")
    if strategy == "careful":
        if not results:
            return _call("add", a, b)
        if len(results) == 1:
            return _call("multiply", results[0], c)
        return f"The result is <answer>{results[-1]}</answer>."
    if strategy == "guesser":
        return f"<answer>{a + b * c}</answer>"
    if strategy == "confused":
        if turn == 0:
            return _call("power", a, b)
        return f"I will do it by hand: <answer>{(a + b) * c}</answer>"
    return _call("add", a, turn)  # looper
