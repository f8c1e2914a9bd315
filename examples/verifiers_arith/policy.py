"""A scripted mock model for ``verifiers-arith``: sums the two numbers of the question.

With tools it first calls ``calc_add``, then boxes the tool's result. Without, rollout k
of a group (the runner names each mock session after its rollout, ending in ``r<k>``)
answers right and boxed, right but bare, or boxed and off by one.
"""

from __future__ import annotations

import re
from typing import Any

from benchmax.testing import RecordedRequest, message_text


def reply(body: dict[str, Any], request: RecordedRequest) -> Any:
    messages = body["messages"]
    question = message_text(next(m for m in messages if m["role"] == "user")["content"])
    a, b = (int(n) for n in re.findall(r"\d+", question)[:2])
    if body.get("tools"):
        results = [m for m in messages if m["role"] == "tool"]
        if not results:
            call = {"name": "calc_add", "arguments": {"a": a, "b": b}}
            return {"content": None, "tool_calls": [call]}
        return f"The tool says \\boxed{{{message_text(results[0]['content'])}}}"
    match = re.search(r"\.r(\d+)$", request.session)
    k = int(match.group(1)) if match else 0
    return [f"<think>{a} + {b}</think>\\boxed{{{a + b}}}", f"{a + b}", f"\\boxed{{{a + b + 1}}}"][
        k % 3
    ]
