"""A mock policy that plays a competent model for the agent examples.

``benchmax run examples/agents/env.py:ToolLoopAgent --mock-policy examples/agents/policy.py:policy``
answers each program's questions: ``What is A + B?`` gets the sum; with tools offered and
no tool result yet, it calls ``add``; a tool result is repeated as the answer.
"""

import re
from typing import Any

_SUM = re.compile(r"What is (-?\d+) \+ (-?\d+)\?")


def policy(body: dict[str, Any]) -> object:
    messages = body["messages"]
    last = messages[-1]
    if last.get("role") == "tool":
        return str(last.get("content"))
    for message in reversed(messages):
        found = (
            _SUM.search(str(message.get("content") or "")) if message["role"] == "user" else None
        )
        if found is None:
            continue
        a, b = int(found.group(1)), int(found.group(2))
        if body.get("tools"):
            return {"tool_calls": [{"name": "add", "arguments": {"a": a, "b": b}}]}
        if str(message.get("content")).startswith("Plan"):
            return f"I will add {a} and {b} by adding the tens, then the ones."
        return str(a + b)
    return "I don't know."
