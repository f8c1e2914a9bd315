"""What a ``BaseEnv`` rollout starts from: its ``Settings`` (limits and settings, read once
when it starts) and its transcript, made from the example payload (``prepare_example``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from benchmax._hook_deadlines import HookDeadline
from benchmax._rollout_limits import Limits

__all__ = ["Settings", "Transcript", "prepare_example"]

Transcript = list[dict[str, Any]]
"""A rollout's messages while it runs: decoded JSON objects. They become
``BaseRollout.messages`` (typed as the SDK's message params) only when it settles."""


@dataclass(frozen=True, slots=True)
class Settings:
    """The limits and settings in effect for one rollout, read once when it starts."""

    limits: Limits
    max_turns: int  # limits.max_turns, checked to be set
    tools: HookDeadline  # limits.tool_timeout, else the runner's default
    setup: HookDeadline  # rollout_context: the runner's default only
    user_turn: HookDeadline
    send_reasoning: bool
    sampling_args: Mapping[str, Any]
    finish_reasons: Mapping[str, str]
    record_tokens: bool


def prepare_example(payload: object) -> tuple[Transcript, dict[str, Any]]:
    """A new transcript of shallow prompt copies, and every other payload field."""
    if not isinstance(payload, Mapping):
        raise TypeError("BaseEnv example payload must be a JSON object")
    prompt = payload.get("prompt_messages")
    if not isinstance(prompt, list) or not prompt:
        raise ValueError("BaseEnv example payload requires a non-empty prompt_messages list")
    transcript: Transcript = []
    for index, message in enumerate(prompt):
        if not isinstance(message, Mapping):
            raise TypeError(f"prompt_messages[{index}] must be a JSON object")
        if not isinstance(message.get("role"), str):
            raise TypeError(f"prompt_messages[{index}].role must be a string")
        transcript.append(dict(message))
    example_args = {key: value for key, value in payload.items() if key != "prompt_messages"}
    return transcript, example_args
