"""Relabeling a logged reply by a teacher model, asked through a ``Judge`` endpoint."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import cast

from benchmax._message_content import split_reasoning
from benchmax._value_checks import is_non_empty_str
from benchmax.rewards import Judge
from benchmax.rewards.text import message_text

__all__ = ["RELABEL_PROMPT_VERSION", "build_relabel_prompt", "teacher_reply"]

RELABEL_PROMPT_VERSION = 1


def _rendered(message: Mapping[str, object]) -> str:
    role = str(message.get("role", "?"))
    lines = []
    text = message_text(message.get("content"))
    if text:
        lines.append(text)
    for call in cast("Iterable[object]", message.get("tool_calls") or []):
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            lines.append(f"(calls tool {function.get('name')} with {function.get('arguments')})")
    return f"[{role}]\n" + ("\n".join(lines) or "(empty)")


def build_relabel_prompt(history: Sequence[Mapping[str, object]]) -> str:
    """The prompt asking a teacher for the assistant's next reply to ``history``
    (chat messages, tool calls and results shown as text), as ``{"reply": "..."}``."""
    conversation = "\n\n".join(_rendered(message) for message in history)
    return (
        "You are an expert assistant writing the reference reply for a training dataset.\n"
        "Here is a conversation, one message per block, each headed by its role:\n\n"
        f"<conversation>\n{conversation}\n</conversation>\n\n"
        "Write the best next reply of the assistant. Return only a JSON object "
        '{"reply": "<the reply text>"}.'
    )


async def teacher_reply(
    judge: Judge,
    history: Sequence[Mapping[str, object]],
    *,
    request_id: str,
    temperature: float = 0.0,
    max_tokens: int | None = None,
) -> str:
    """The teacher's reply to ``history``, reasoning (``<think>...</think>``) left out.
    Raises ``JudgeError`` when the request fails and ``ValueError`` when the reply is not
    ``{"reply": "<non-empty text>"}`` (text outside reasoning)."""
    parsed, _raw = await judge.request_json(
        build_relabel_prompt(history),
        request_id=request_id,
        temperature=temperature,
        max_tokens=max_tokens,
    )
    reply = parsed.get("reply")
    # Reasoning the teacher wrote into the reply (<think>...</think>) is no ground truth.
    visible = split_reasoning(reply)[0].strip() if isinstance(reply, str) else reply
    if not is_non_empty_str(visible):
        raise ValueError(
            f"teacher reply has no non-empty 'reply' string: {json.dumps(parsed)[:200]}"
        )
    return str(visible)
