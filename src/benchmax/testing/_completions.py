"""OpenAI-shaped replies: chat completions, model lists, errors and injected faults."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Final, cast

from benchmax.testing._errors import MockServerError
from benchmax.testing._faults import Fault
from benchmax.testing._http import Reply
from benchmax.testing._tokens import ToyChatTemplate, token_fields

__all__ = [
    "DEFAULT_MODEL",
    "PolicyResultError",
    "completion_reply",
    "error_reply",
    "fault_reply",
    "models_reply",
]

DEFAULT_MODEL: Final = "mock-model"
MALFORMED_BODY: Final = b'{"id": "chatcmpl-mock", "object": "chat.completion", "choices": [{'

_ids = itertools.count(1)
_JSON_HEADERS: Final = ((b"content-type", b"application/json"),)


class PolicyResultError(MockServerError, TypeError):
    """A policy returned something that is not an answer."""


def _dumps(value: object) -> bytes:
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    # A policy's lone surrogate ("\ud800") goes out as that JSON escape, as servers send it.
    return text.encode("utf-8", "backslashreplace")


def error_reply(
    status: int,
    message: str,
    *,
    error_type: str = "invalid_request_error",
    code: str | None = None,
    headers: Sequence[tuple[bytes, bytes]] = (),
) -> Reply:
    """HTTP ``status`` with an OpenAI-style ``{"error": {...}}`` body."""
    error = {"message": message, "type": error_type, "param": None, "code": code}
    return Reply(status, _dumps({"error": error}), (*_JSON_HEADERS, *headers))


def fault_reply(fault: Fault, request_body: object) -> Reply:
    """What the server sends for ``fault`` (a delay is not a reply: the caller waits)."""
    match fault.kind:
        case "drop":
            return Reply(None)
        case "malformed":
            return Reply(200, MALFORMED_BODY, _JSON_HEADERS)
        case "raw":
            assert fault.status_code is not None and fault.body is not None
            return Reply(fault.status_code, fault.body, _JSON_HEADERS)
        case "no_choices":
            body = request_body if isinstance(request_body, Mapping) else {}
            return completion_reply(body, None, 0, with_choice=False)
        case "status":
            assert fault.status_code is not None and fault.error_type is not None
            headers = []
            if fault.retry_after is not None:
                seconds = float(fault.retry_after)
                text = str(int(seconds)) if seconds.is_integer() else repr(seconds)
                headers.append((b"retry-after", text.encode()))
            return error_reply(
                fault.status_code,
                fault.message or "",
                error_type=fault.error_type,
                code=fault.error_code,
                headers=headers,
            )
        case _:
            return error_reply(
                500,
                "a mock policy cannot return a delay fault; await asyncio.sleep() in the policy",
                error_type="server_error",
                code="mock_policy_error",
            )


def models_reply(model: str) -> Reply:
    """The ``GET /v1/models`` list, holding one model."""
    data = [{"id": model, "object": "model", "created": 0, "owned_by": "benchmax"}]
    return Reply(200, _dumps({"object": "list", "data": data}), _JSON_HEADERS)


def completion_reply(
    request_body: Mapping[str, object],
    reply: object,
    prompt_bytes: int,
    *,
    with_choice: bool = True,
    template: ToyChatTemplate | None = None,
) -> Reply:
    """A ``chat.completion`` answering ``request_body`` with the policy's ``reply``.

    ``reply`` is text or a message dict; ``with_choice=False`` gives ``"choices": []``.
    With a ``template`` (token mode) the reply is shaped as vLLM's, token counts are
    exact and the token fields the request asks for are filled in.
    Raises ``PolicyResultError`` when ``reply`` is neither.
    """
    if template is not None and with_choice:
        return _token_reply(request_body, reply, template)
    model = request_body.get("model")
    choices: list[dict[str, object]] = []
    completion_tokens = 0
    if with_choice:
        message, finish_reason = _assistant_message(reply)
        choices.append(
            {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
        )
        completion_tokens = _token_estimate(message)
    prompt_tokens = max(1, prompt_bytes // 4)
    body = _dumps(
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
    return Reply(200, body, _JSON_HEADERS)


def _token_reply(
    request_body: Mapping[str, object], reply: object, template: ToyChatTemplate
) -> Reply:
    """A reply shaped as vLLM's ``ChatCompletionResponse`` (its ``model_dump``, so the
    token fields are ``null`` unless the request asked for them)."""
    model = request_body.get("model")
    message, finish_reason = _assistant_message(reply)
    prompt, completion, logprobs, with_ids = token_fields(request_body, message, template)
    choice = {
        "index": 0,
        "message": message,
        "logprobs": logprobs,
        "finish_reason": finish_reason,
        "stop_reason": None,
        "token_ids": completion if with_ids else None,
    }
    body = _dumps(
        {
            "id": f"chatcmpl-mock-{next(_ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model if isinstance(model, str) and model else DEFAULT_MODEL,
            "choices": [choice],
            "service_tier": None,
            "system_fingerprint": None,
            "usage": {
                "prompt_tokens": len(prompt),
                "total_tokens": len(prompt) + len(completion),
                "completion_tokens": len(completion),
                "prompt_tokens_details": None,
            },
            "prompt_logprobs": None,
            "prompt_token_ids": prompt if with_ids else None,
            "kv_transfer_params": None,
        }
    )
    return Reply(200, body, _JSON_HEADERS)


def _assistant_message(reply: object) -> tuple[dict[str, object], str | None]:
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


def _tool_call(call: object, index: int) -> dict[str, object]:
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
        arguments = json.dumps(arguments, ensure_ascii=False, allow_nan=False)
    shaped = dict(call)
    shaped.pop("name", None)
    shaped.pop("arguments", None)
    shaped["id"] = call.get("id") or f"call_mock_{next(_ids)}"
    shaped["type"] = call_type
    shaped["function"] = {**function, "arguments": arguments}
    return shaped


def _token_estimate(message: Mapping[str, object]) -> int:
    content = message.get("content")
    size = len(content) if isinstance(content, str) else 0
    # The tool calls as _tool_call left them: each a dict with a "function" dict.
    for call in cast("Iterable[Mapping[str, Mapping[str, str]]]", message.get("tool_calls") or ()):
        size += len(call["function"].get("arguments", ""))
    return max(1, size // 4)
