"""OpenAI-shaped response bodies: chat completions, model lists and errors."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Mapping
from typing import Any, Final

from benchmax.testing._faults import Fault

__all__ = [
    "DEFAULT_MODEL",
    "PolicyResultError",
    "completion_body",
    "error_body",
    "models_body",
]

DEFAULT_MODEL: Final = "mock-model"
MALFORMED_BODY: Final = b'{"id": "chatcmpl-mock", "object": "chat.completion", "choices": [{'

_ids = itertools.count(1)


class PolicyResultError(TypeError):
    """A policy returned something that is not an answer."""


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def error_body(message: str, *, error_type: str, code: str | None) -> bytes:
    return _dumps({"error": {"message": message, "type": error_type, "param": None, "code": code}})


def fault_error_body(fault: Fault) -> bytes:
    return error_body(fault.message or "", error_type=fault.error_type or "", code=fault.error_code)


def models_body(model: str) -> bytes:
    return _dumps(
        {
            "object": "list",
            "data": [{"id": model, "object": "model", "created": 0, "owned_by": "benchmax"}],
        }
    )


def completion_body(
    request_body: Mapping[str, Any], reply: Any, prompt_bytes: int, *, with_choice: bool = True
) -> bytes:
    """A ``chat.completion`` answering ``request_body`` with the policy's ``reply``.

    ``reply`` is text or a message dict; ``with_choice=False`` gives ``"choices": []``.
    """
    model = request_body.get("model")
    choices: list[dict[str, Any]] = []
    completion_tokens = 0
    if with_choice:
        message, finish_reason = _assistant_message(reply)
        choices.append(
            {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
        )
        completion_tokens = _token_estimate(message)
    prompt_tokens = max(1, prompt_bytes // 4)
    return _dumps(
        {
            "id": f"chatcmpl-mock-{next(_ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model if isinstance(model, str) and model else DEFAULT_MODEL,
            "choices": choices,
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
    )


def _assistant_message(reply: Any) -> tuple[dict[str, Any], str | None]:
    if isinstance(reply, str):
        return {"role": "assistant", "content": reply}, "stop"
    if not isinstance(reply, Mapping):
        raise PolicyResultError(
            f"mock policy returned {type(reply).__name__}; expected str, message dict or Fault"
        )
    message = {key: value for key, value in reply.items() if key != "finish_reason"}
    message["role"] = message.get("role") or "assistant"
    message.setdefault("content", None)
    raw_calls = message.pop("tool_calls", None)
    if raw_calls:
        if not isinstance(raw_calls, list | tuple):
            raise PolicyResultError("mock policy tool_calls must be a list")
        message["tool_calls"] = [_tool_call(call, index) for index, call in enumerate(raw_calls)]
    default_reason = "tool_calls" if raw_calls else "stop"
    return message, reply.get("finish_reason", default_reason)


def _tool_call(call: Any, index: int) -> dict[str, Any]:
    if not isinstance(call, Mapping):
        raise PolicyResultError(f"mock policy tool_calls[{index}] must be a dict")
    if "function" in call:
        function = call["function"]
        call_type = call.get("type", "function")
    else:  # short form {"name": ..., "arguments": ...}
        function = {"name": call.get("name"), "arguments": call.get("arguments", {})}
        call_type = "function"
    if not isinstance(function, Mapping):
        raise PolicyResultError(f"mock policy tool_calls[{index}].function must be a dict")
    arguments = function.get("arguments", "{}")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    shaped = dict(call)
    shaped.pop("name", None)
    shaped.pop("arguments", None)
    shaped["id"] = call.get("id") or f"call_mock_{next(_ids)}"
    shaped["type"] = call_type
    shaped["function"] = {**function, "arguments": arguments}
    return shaped


def _token_estimate(message: Mapping[str, Any]) -> int:
    content = message.get("content")
    size = len(content) if isinstance(content, str) else 0
    for call in message.get("tool_calls") or ():
        size += len(call["function"].get("arguments", ""))
    return max(1, size // 4)
