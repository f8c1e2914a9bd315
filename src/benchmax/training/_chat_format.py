"""Chat-completions bodies for the embedded sampler: request in, vLLM-shaped reply out.

A request is read as vLLM 0.x's OpenAI server reads it (the fields benchmax and common
clients send): ``messages`` rendered with the tokenizer's chat template
(``add_generation_prompt``, the request's ``tools`` and ``chat_template_kwargs``; text
content parts joined; an assistant's tool-call ``arguments`` JSON string parsed into an
object, as vLLM does before templating), then tokenized without adding special tokens;
sampling from ``max_tokens`` / ``max_completion_tokens``, ``temperature`` (default 1),
``top_p``, ``top_k``, ``seed``, ``stop``, ``stop_token_ids``, ``ignore_eos``,
``logprobs`` / ``top_logprobs``. Unknown fields are ignored; ``n`` other than 1 and
``stream`` are refused.

The reply carries what ``benchmax._modelhttp.tokens`` reads: ``prompt_token_ids`` at the
top and ``token_ids`` on the choice when ``return_token_ids`` is set, ``logprobs.content``
with one entry per completion token when ``logprobs`` is set (``token`` is the token's text,
or ``"token_id:N"`` with ``return_tokens_as_token_ids``), ``finish_reason`` (``stop``,
``length``, or ``tool_calls`` when tool calls were parsed from a completion that was not
cut by ``max_tokens``), ``stop_reason``, ``usage``, and
``weights_version`` (which weights sampled it). With ``tools`` in the request (and
``tool_choice`` not ``"none"``), Hermes-style ``<tool_call>{"name": ..., "arguments":
...}</tool_call>`` blocks in the text become ``message.tool_calls`` (arguments as a JSON
string) and the text around them the ``content`` (``None`` when empty), as vLLM's
``hermes`` parser does; a block that is not such JSON leaves the whole text as content.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchmax.training._decoding import Sampled, SamplingParams
from benchmax.training._errors import TrainingError

__all__ = [
    "ChatRequest",
    "RequestError",
    "chat_reply",
    "parse_chat_request",
    "render_prompt",
    "render_text",
]

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_MAX_TOP_LOGPROBS = 20


class RequestError(TrainingError, ValueError):
    """A request the sampler refuses: ``status`` (400, 404) and a message naming the field."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """A parsed chat request: its prompt ids, sampling, and what the reply must carry."""

    model: str
    prompt_ids: tuple[int, ...]
    params: SamplingParams
    logprobs: bool
    token_ids: bool
    tokens_as_ids: bool
    parse_tools: bool


def render_prompt(tokenizer: Any, body: Mapping[str, object]) -> list[int]:
    """The prompt ids of ``body``'s ``messages`` (module docs); ``RequestError`` for
    messages that are not a non-empty list of objects with a role, or that the chat
    template refuses."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError("messages must be a non-empty list")
    generation = body.get("add_generation_prompt", True)
    text = render_text(tokenizer, messages, body, generation=bool(generation))
    return list(tokenizer.encode(text, add_special_tokens=False))


def render_text(
    tokenizer: Any, messages: Sequence[object], body: Mapping[str, object], *, generation: bool
) -> str:
    """``messages`` rendered by the chat template as text, with ``body``'s ``tools`` and
    ``chat_template_kwargs`` (module docs); ``RequestError`` as :func:`render_prompt`."""
    prepared = [_template_message(message, index) for index, message in enumerate(messages)]
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise RequestError("tools must be a list")
    extra = body.get("chat_template_kwargs") or {}
    if not isinstance(extra, Mapping):
        raise RequestError("chat_template_kwargs must be an object")
    try:
        text = tokenizer.apply_chat_template(
            prepared,
            tools=tools or None,
            add_generation_prompt=generation,
            tokenize=False,
            **extra,
        )
    except Exception as error:  # jinja raises many kinds: the request is what was wrong
        raise RequestError(f"the chat template could not render the messages: {error}") from None
    return str(text)


def parse_chat_request(
    tokenizer: Any,
    body: object,
    *,
    model_name: str,
    max_model_len: int,
    max_sequence_tokens: int | None = None,
    prompt_ids: Sequence[int] | None = None,
) -> ChatRequest:
    """Validate a chat-completions body and render its prompt (or take ``prompt_ids``, a
    rollout's continued token stream); ``RequestError`` (400) naming the bad field, 404 for
    another model name, 400 with vLLM's "maximum context length" wording when prompt +
    ``max_tokens`` does not fit. ``max_sequence_tokens`` is a sequence budget below the
    context window: ``max_tokens`` is cut to what the prompt leaves of it (the reply then
    ends with ``length``), and a prompt that already fills it gets the same "maximum
    context length" 400."""
    if not isinstance(body, Mapping):
        raise RequestError("the body must be a JSON object")
    model = body.get("model", model_name)
    if model != model_name:
        raise RequestError(
            f"The model `{model}` does not exist (this server serves {model_name!r}).", status=404
        )
    if body.get("stream"):
        raise RequestError("stream is not supported by the embedded sampler")
    if body.get("n", 1) != 1:
        raise RequestError("n must be 1")
    if prompt_ids is None:
        prompt_ids = render_prompt(tokenizer, body)
    room = max_model_len - len(prompt_ids)
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    if limit is None:
        limit = room
    elif not _is_int(limit) or limit < 1:
        raise RequestError(f"max_tokens must be a positive integer, got {limit!r}")
    if room < 1 or limit > room:
        raise RequestError(
            f"This model's maximum context length is {max_model_len} tokens. However, you "
            f"requested {len(prompt_ids) + limit} tokens ({len(prompt_ids)} in the messages, "
            f"{limit} in the completion). Please reduce the length of the messages or "
            "completion."
        )
    if max_sequence_tokens is not None:
        left = max_sequence_tokens - len(prompt_ids)
        if left < 1:
            raise RequestError(
                f"This model's maximum context length is {max_sequence_tokens} tokens (the "
                f"rollout's token budget, --max-sequence-tokens). However, you requested "
                f"{len(prompt_ids) + 1} tokens ({len(prompt_ids)} in the messages, 1 in the "
                "completion). Please reduce the length of the messages or completion."
            )
        limit = min(limit, left)
    top_logprobs = body.get("top_logprobs") or 0
    if not _is_int(top_logprobs) or not 0 <= top_logprobs <= _MAX_TOP_LOGPROBS:
        raise RequestError(f"top_logprobs must be an integer from 0 to {_MAX_TOP_LOGPROBS}")
    params = SamplingParams(
        max_tokens=limit,
        temperature=_number(body, "temperature", 1.0, low=0.0),
        top_p=_number(body, "top_p", 1.0, low=0.0, high=1.0, open_low=True),
        top_k=_top_k(body.get("top_k")),
        seed=_seed(body.get("seed")),
        stop=_stops(body.get("stop")),
        stop_token_ids=_token_ids(body.get("stop_token_ids")),
        ignore_eos=body.get("ignore_eos") is True,
        top_logprobs=top_logprobs if body.get("logprobs") else 0,
    )
    tool_choice = body.get("tool_choice")
    return ChatRequest(
        model=model_name,
        prompt_ids=tuple(prompt_ids),
        params=params,
        logprobs=body.get("logprobs") is True,
        token_ids=body.get("return_token_ids") is True,
        tokens_as_ids=body.get("return_tokens_as_token_ids") is True,
        parse_tools=bool(body.get("tools")) and tool_choice != "none",
    )


def chat_reply(tokenizer: Any, request: ChatRequest, sampled: Sampled) -> dict[str, object]:
    """The chat-completion body for ``sampled`` (module docs)."""
    message: dict[str, object] = {"role": "assistant", "content": sampled.text}
    finish_reason: str = sampled.finish_reason
    calls = _tool_calls(sampled) if request.parse_tools else None
    if calls is not None:
        content, tool_calls = calls
        message = {"role": "assistant", "content": content, "tool_calls": tool_calls}
        if sampled.finish_reason == "stop":  # a reply cut by max_tokens stays "length"
            finish_reason = "tool_calls"
    choice: dict[str, object] = {
        "index": 0,
        "message": message,
        "logprobs": None,
        "finish_reason": finish_reason,
        "stop_reason": sampled.stop_reason,
    }
    if request.logprobs:
        choice["logprobs"] = {"content": _logprob_entries(tokenizer, request, sampled)}
    reply: dict[str, object] = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.model,
        "choices": [choice],
        "usage": {
            "prompt_tokens": len(sampled.prompt_ids),
            "completion_tokens": len(sampled.completion_ids),
            "total_tokens": len(sampled.prompt_ids) + len(sampled.completion_ids),
        },
        "weights_version": sampled.weights_version,
    }
    if request.token_ids:
        choice["token_ids"] = list(sampled.completion_ids)
        reply["prompt_token_ids"] = list(sampled.prompt_ids)
    return reply


def _template_message(message: object, index: int) -> dict[str, object]:
    if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
        raise RequestError(f"messages[{index}] must be an object with a string role")
    prepared = dict(message)
    content = prepared.get("content")
    if isinstance(content, list) and all(
        isinstance(part, Mapping) and part.get("type") == "text" for part in content
    ):
        prepared["content"] = "".join(str(part.get("text", "")) for part in content)
    calls = prepared.get("tool_calls")
    if isinstance(calls, list):
        prepared["tool_calls"] = [_templated_call(call) for call in calls]
    return prepared


def _templated_call(call: object) -> object:
    if not isinstance(call, Mapping) or not isinstance(call.get("function"), Mapping):
        return call
    function = dict(call["function"])
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            function["arguments"] = parsed
    return {**call, "function": function}


def _tool_calls(sampled: Sampled) -> tuple[str | None, list[dict[str, object]]] | None:
    text = sampled.text
    blocks = list(_TOOL_CALL.finditer(text))
    if not blocks:
        return None
    calls: list[dict[str, object]] = []
    for number, block in enumerate(blocks):
        try:
            parsed = json.loads(block.group(1))
        except ValueError:
            return None
        if not isinstance(parsed, dict) or not isinstance(parsed.get("name"), str):
            return None
        arguments = parsed.get("arguments", {})
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        digest = hashlib.sha256(
            f"{sampled.prompt_ids}|{sampled.completion_ids}|{number}".encode()
        ).hexdigest()
        calls.append(
            {
                "id": f"call_{digest[:24]}",
                "type": "function",
                "function": {"name": parsed["name"], "arguments": arguments},
            }
        )
    content = _TOOL_CALL.sub("", text).strip()
    return (content or None), calls


def _logprob_entries(
    tokenizer: Any, request: ChatRequest, sampled: Sampled
) -> list[dict[str, object]]:
    def token(token_id: int) -> str:
        if request.tokens_as_ids:
            return f"token_id:{token_id}"
        return str(tokenizer.decode([token_id]))

    entries: list[dict[str, object]] = []
    for token_id, logprob, top in zip(
        sampled.completion_ids, sampled.logprobs, sampled.top_logprobs, strict=True
    ):
        text = token(token_id)
        entries.append(
            {
                "token": text,
                "logprob": logprob,
                "bytes": list(text.encode("utf-8")),
                "top_logprobs": [
                    {"token": token(other), "logprob": value, "bytes": None} for other, value in top
                ],
            }
        )
    return entries


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(
    body: Mapping[str, object],
    name: str,
    default: float,
    *,
    low: float,
    high: float = math.inf,
    open_low: bool = False,
) -> float:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise RequestError(f"{name} must be a finite number, got {value!r}")
    if value < low or value > high or (open_low and value == low):
        bounds = f"{'(' if open_low else '['}{low:g}, {high:g}]"
        raise RequestError(f"{name} must be in {bounds}, got {value!r}")
    return float(value)


def _top_k(value: object) -> int:
    if value is None or value == -1:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RequestError(f"top_k must be -1, 0 or a positive integer, got {value!r}")
    return value


def _seed(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(f"seed must be an integer, got {value!r}")
    return value


def _stops(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
        raise RequestError("stop must be a non-empty string or a list of them")
    return tuple(stops)


def _token_ids(value: object) -> tuple[int, ...]:
    if value is None:
        return ()
    if not isinstance(value, Sequence) or not all(_is_int(v) and v >= 0 for v in value):
        raise RequestError("stop_token_ids must be a list of non-negative integers")
    return tuple(value)
