"""The policy's action (one assistant message, optionally its tokens) and the
chat-completions reply it becomes for the rollout that waits on it."""

from __future__ import annotations

import itertools
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from benchmax._trajectory_checks import check_token_ids

__all__ = [
    "AssistantMessage",
    "PolicyAction",
    "ValidationError",
    "action_schema",
    "completion_reply",
]

_REPLY_IDS = itertools.count(1)


class AssistantMessage(BaseModel):
    """The assistant's turn, as an OpenAI chat-completions assistant message.

    ``content`` is text, ``null`` (a turn of tool calls only) or a list of content
    parts; ``tool_calls`` are OpenAI function calls (``{"id", "type": "function",
    "function": {"name", "arguments"}}``; ``arguments`` a JSON text or object; a missing
    ``id`` is made up). Other fields (``reasoning_content``...) are passed on as sent.
    """

    model_config = ConfigDict(extra="allow")

    role: Literal["assistant"] = Field(description="Always 'assistant'.")
    content: str | list[dict[str, Any]] | None = Field(
        default=None, description="The reply's text (null for a turn of tool calls only)."
    )
    tool_calls: list[dict[str, Any]] | None = Field(
        default=None,
        description="OpenAI function tool calls: {id, type: 'function', function: "
        "{name, arguments}}.",
    )

    @model_validator(mode="after")
    def _says_something(self) -> AssistantMessage:
        if self.content is None and not self.tool_calls:
            raise ValueError("an assistant message needs content or tool_calls")
        return self


class PolicyAction(BaseModel):
    """One OpenEnv ``/step`` action: the policy's assistant message.

    ``finish_reason`` defaults to ``tool_calls`` when the message calls tools, else
    ``stop`` (``length`` marks a reply cut by the output limit). ``usage`` is the
    generation's token usage (``prompt_tokens``, ``completion_tokens``). Episodes reset
    with ``record_tokens`` need the exact tokens of every turn: ``prompt_token_ids``,
    ``completion_token_ids`` and one ``logprobs`` value per completion token.
    """

    model_config = ConfigDict(extra="forbid")

    message: AssistantMessage
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="OpenEnv's action metadata; not used."
    )

    @field_validator("prompt_token_ids", "completion_token_ids", mode="before")
    @classmethod
    def _exact_token_ids(cls, value: object, info: ValidationInfo) -> object:
        """Token ids by the rule a recorded model call follows (``true`` or ``1.0`` is
        no token id), not pydantic's lax coercion."""
        try:
            ids = check_token_ids(value, str(info.field_name))
        except TypeError as error:  # pydantic reports ValueError only
            raise ValueError(str(error)) from None
        return None if ids is None else list(ids)

    @model_validator(mode="after")
    def _aligned_logprobs(self) -> PolicyAction:
        ids, logprobs = self.completion_token_ids, self.logprobs
        if logprobs is not None and (ids is None or len(ids) != len(logprobs)):
            raise ValueError("logprobs needs completion_token_ids, one logprob per token id")
        return self


def action_schema() -> dict[str, object]:
    """The JSON Schema of a ``PolicyAction`` (OpenEnv's ``/schema`` ``action``)."""
    return PolicyAction.model_json_schema()


def completion_reply(action: PolicyAction, model: str) -> dict[str, object]:
    """The chat-completions reply (vLLM-shaped when the action carries tokens) that
    answers a rollout's model call with ``action``."""
    message = action.message.model_dump(exclude_none=True)
    message.setdefault("content", None)
    if action.message.tool_calls:
        message["tool_calls"] = [_tool_call(call) for call in action.message.tool_calls]
    finish_reason = action.finish_reason or ("tool_calls" if message.get("tool_calls") else "stop")
    choice: dict[str, object] = {"index": 0, "message": message, "finish_reason": finish_reason}
    reply: dict[str, object] = {
        "id": f"chatcmpl-serve-{next(_REPLY_IDS)}",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [choice],
    }
    if action.usage is not None:
        reply["usage"] = action.usage
    if action.prompt_token_ids is not None:
        reply["prompt_token_ids"] = action.prompt_token_ids
    if action.completion_token_ids is not None:
        choice["token_ids"] = action.completion_token_ids
    if action.logprobs is not None:
        choice["logprobs"] = {
            "content": [{"token": "", "logprob": value} for value in action.logprobs]
        }
    return reply


def _tool_call(call: dict[str, object]) -> dict[str, object]:
    """OpenAI's shape for a call also given as ``{"name", "arguments"}``."""
    if "function" in call or "name" not in call:
        return call
    shaped = {key: value for key, value in call.items() if key not in ("name", "arguments")}
    shaped.setdefault("type", "function")
    shaped["function"] = {"name": call["name"], "arguments": call.get("arguments", {})}
    return shaped
