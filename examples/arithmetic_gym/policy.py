"""A scripted mock model for reasoning-gym's arithmetic tasks (``chain_sum``,
``basic_arithmetic``): deterministic, with a realistic spread.

It thinks in ``<think>`` tags, then computes the expression in the question itself and
answers in ``<answer>`` tags, as reasoning-gym's default system prompt asks. Which
rollouts go wrong depends on the question and the rollout's index in its group (the
runner names each mock session after its rollout, ending in ``r<k>``)::

    uv run benchmax run benchmax.sources.reasoning_gym:ReasoningGymEnv \\
        --env-arg task=chain_sum --env-arg size=8 -k 4 \\
        --mock-policy examples/arithmetic_gym/policy.py:reply
"""

from __future__ import annotations

import ast
import hashlib
import operator
import re
from collections.abc import Callable
from typing import Any

from benchmax.testing import RecordedRequest, message_text

_EXPRESSION = re.compile(r"([-+*/().\d\s]+)=\s*$")
_OPERATORS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


def _evaluate(node: ast.AST) -> float:
    """Arithmetic on numbers only (never ``eval``)."""
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_evaluate(node.operand)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    raise ValueError("not arithmetic")


def solve(question: str) -> str | None:
    """The value of the arithmetic expression that ends ``question``, or ``None``."""
    match = _EXPRESSION.search(question.strip())
    if match is None:
        return None
    try:
        value = _evaluate(ast.parse(match.group(1).strip(), mode="eval"))
    except (SyntaxError, ValueError, ZeroDivisionError):
        return None
    return str(int(value)) if float(value).is_integer() else f"{value:.6g}"


def rollout_index(request: RecordedRequest) -> int:
    match = re.search(r"\.r(\d+)$", request.session)
    return int(match.group(1)) if match else 0


def reply(body: dict[str, Any], request: RecordedRequest) -> str:
    question = message_text(body["messages"][-1]["content"])
    truth = solve(question)
    if truth is None:
        return "<think>I cannot parse this.</think><answer>unknown</answer>"
    skill = hashlib.sha256(question.encode()).digest()[0] % 3
    k = rollout_index(request)
    thought = f"<think>Adding the terms left to right gives {truth}.</think>"
    if skill == 0:  # easy: always right
        return f"{thought}<answer>{truth}</answer>"
    if skill == 1:  # right, but every other rollout forgets the tags
        return f"{thought}<answer>{truth}</answer>" if k % 2 == 0 else f"It is {truth}."
    # hard: the answer in the reasoning is right, the tagged one off by one on odd rollouts
    wrong = str(int(float(truth)) + 1) if k % 2 else truth
    return f"{thought}<answer>{wrong}</answer>"
