"""A whole chat-completions reply as the event stream a program that asked to stream expects.

The upstream is always asked without streaming (its token ids and logprobs come whole);
a program that sent ``stream: true`` gets the reply as OpenAI's ``chat.completion.chunk``
events: per choice, one chunk with the role, one with the text (and reasoning) and, when
asked, its logprobs, one per tool call (id, name and whole arguments), one with the
finish reason; then, when ``stream_options.include_usage`` is set, a chunk with the usage
and no choices; then ``data: [DONE]``. The OpenAI SDKs, LangChain and curl read it as any
streamed reply.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from benchmax._modelhttp import encode_json

__all__ = ["reply_events"]

_REASONING_FIELDS = ("reasoning_content", "reasoning")


def reply_events(reply: Mapping[str, Any], *, include_usage: bool) -> Iterator[bytes]:
    """The ``data: ...`` events of ``reply`` (a decoded chat.completion object), ending
    with ``data: [DONE]``."""
    head = {
        "id": reply.get("id", "chatcmpl-capture"),
        "object": "chat.completion.chunk",
        "created": reply.get("created", 0),
        "model": reply.get("model", ""),
    }
    choices = reply.get("choices")
    for choice in choices if isinstance(choices, list) else ():
        if not isinstance(choice, Mapping):
            continue
        index = choice.get("index", 0)
        message = choice.get("message")
        message = message if isinstance(message, Mapping) else {}
        yield _event(head, index, {"role": "assistant", "content": ""})
        text: dict[str, Any] = {}
        for name in _REASONING_FIELDS:
            if isinstance(message.get(name), str) and message[name]:
                text[name] = message[name]
        if isinstance(message.get("content"), str) and message["content"]:
            text["content"] = message["content"]
        logprobs = choice.get("logprobs")
        if text or logprobs:
            yield _event(head, index, text, logprobs=logprobs)
        calls = message.get("tool_calls")
        for position, call in enumerate(calls if isinstance(calls, list) else ()):
            if isinstance(call, Mapping):
                delta_call = {"index": position, **call}
                yield _event(head, index, {"tool_calls": [delta_call]})
        yield _event(head, index, {}, finish_reason=choice.get("finish_reason") or "stop")
    if include_usage and reply.get("usage") is not None:
        yield _data({**head, "choices": [], "usage": reply["usage"]})
    yield b"data: [DONE]\n\n"


def _event(
    head: Mapping[str, Any],
    index: object,
    delta: Mapping[str, Any],
    *,
    finish_reason: object = None,
    logprobs: object = None,
) -> bytes:
    choice: dict[str, Any] = {"index": index, "delta": delta, "finish_reason": finish_reason}
    if logprobs is not None:
        choice["logprobs"] = logprobs
    return _data({**head, "choices": [choice]})


def _data(chunk: Mapping[str, Any]) -> bytes:
    return b"data: " + encode_json(chunk) + b"\n\n"
