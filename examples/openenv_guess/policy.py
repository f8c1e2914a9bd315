"""A scripted mock model for the guessing game: it bisects 1..20 from the feedback.

Rollout 1 of each group (the runner names each mock session after its rollout, ending
in ``r<k>``) opens with 20 instead of 10, so groups have a reward spread.
"""

from __future__ import annotations

import json
import re
from typing import Any

from benchmax.testing import RecordedRequest, message_text

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)


def guess(body: dict[str, Any], request: RecordedRequest) -> str:
    low, high, last = 1, 20, None
    for message in body["messages"]:
        if message["role"] == "assistant":
            last = int(_THINK.sub("", message_text(message["content"])))
        elif message["role"] == "user" and last is not None:
            feedback = json.loads(message_text(message["content"]))["feedback"]
            low, high = (last + 1, high) if feedback == "higher" else (low, last - 1)
    if last is None and request.session.endswith(".r1"):
        return "<think>start high</think>20"
    return f"<think>between {low} and {high}</think>{(low + high) // 2}"
