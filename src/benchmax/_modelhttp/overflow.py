"""Recognizing "the prompt no longer fits the context window" in a server's refusal.

Servers say it in many ways (``beyond.md`` §9). A refusal is a context overflow when its
HTTP status is one a request-validation error uses (400, 413, 422) or it is an error
object in a 200 reply that names no other status, and either its code/type (or vLLM's
``param``) names the condition or its message reads like one of these (matched
case-insensitively):

============================  ===========================================================
server                        what it sends
============================  ===========================================================
0.2 contract                  ``code: "context_budget_exceeded"``
OpenAI                        ``code: "context_length_exceeded"`` ("This model's maximum
                              context length is N tokens. However, your messages ...";
                              newer "Your input exceeds the context window of this model.")
vLLM (older, 0.4-0.8)         400 ``{"object": "error", "message": "This model's maximum
                              context length is N tokens. However, you requested M tokens
                              (P in the messages, C in the completion). Please reduce the
                              length of the messages or completion.", ...}``
vLLM (newer)                  400 ``{"error": {"message": "This model's maximum context
                              length is N tokens. However, your request has P input
                              tokens. ...", "param": "input_tokens", ...}}`` and, for
                              prompt + ``max_tokens`` over the window, "'max_tokens' or
                              'max_completion_tokens' is too large: C. This model's
                              maximum context length is N tokens and your request has P
                              input tokens (C > N - P)."; from the engine "The decoder
                              prompt (length P) is longer than the maximum model length
                              of N." / "Prompt length of P is longer than the maximum
                              model length of N."; older "max_tokens must be at least 1,
                              got -K."
vLLM (0.2x-0.3x renderer)     "... However, you requested C output tokens and your prompt
                              contains at least P input tokens, for a total of at least T
                              tokens. ...", "... your prompt contains at least P input
                              tokens, which exceeds this limit even without any output
                              tokens ...", "You passed P input tokens and requested C
                              output tokens. However, the model's context length is only
                              N tokens ..."; every one with ``param: "input_tokens"``
                              (or ``"input_text"`` for the characters-before-tokenizing
                              check) and its text ending "(parameter=input_tokens,
                              value=P)"
SGLang                        "The input (P tokens) is longer than the model's context
                              length (N tokens).", "Requested token count exceeds the
                              model's maximum context length of N tokens. ...", from the
                              scheduler "Input length (P tokens) exceeds the maximum
                              allowed length (N tokens). Use a shorter input or enable
                              --allow-auto-truncate." and, disaggregated, "Request R
                              exceeds the maximum number of tokens: P > N"
TGI                           422 ``{"error": "Input validation error: `inputs` tokens +
                              `max_new_tokens` must be <= N. Given: ...", "error_type":
                              "validation"}`` and "`inputs` must have less than N tokens"
llama.cpp server              ``type: "exceed_context_size_error"`` ("request (P tokens)
                              exceeds the available context size (N tokens), try
                              increasing it", or "the request exceeds the available
                              context size, try increasing it")
llama-cpp-python server       400 ``code: "context_length_exceeded"`` (the OpenAI form)
Ollama                        400 "the prompt is longer than the context length currently
                              available to the model; ...", "the input length exceeds the
                              context length", "input length (P tokens) exceeds the
                              model's maximum context length (N tokens)"
LiteLLM (proxy and SDK)       400 whose message starts ``litellm.ContextWindowExceededError``
============================  ===========================================================

Anything else (an unrelated 400, a 401 even with one of these codes, a 5xx) is not.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

__all__ = ["OVERFLOW_CODES", "OVERFLOW_PARAMS", "OVERFLOW_STATUSES", "is_context_overflow"]

OVERFLOW_STATUSES: Final = frozenset({400, 413, 422})
"""HTTP statuses servers use for a request the model cannot take (validation errors)."""

OVERFLOW_CODES: Final = frozenset(
    {
        "context_budget_exceeded",
        "context_length_exceeded",
        "exceed_context_size_error",
        "context_window_exceeded",
        "model_context_window_exceeded",
    }
)
"""Error ``code``/``type`` values (lower case) that name a context overflow."""

OVERFLOW_PARAMS: Final = frozenset({"input_tokens", "input_text"})
"""Error ``param`` values naming the prompt's length: vLLM's validation errors for a prompt
over the context window (its only uses of these names)."""

_PHRASES: Final = (
    "maximum context length",
    "maximum model length",
    "model's context length",
    "available context size",
    "contextwindowexceeded",
    "context_length_exceeded",
    "exceed_context_size_error",
    "`inputs` tokens + `max_new_tokens` must be <=",
    "`inputs` must have less than",
    "please reduce the length of the messages",
    "prompt is too long",
    "exceeds this limit even without any output tokens",
    "(parameter=input_tokens,",
    "(parameter=input_text,",
    "exceeds the context window",
    "exceeds the context length",
    "longer than the context length",
)
_NEGATIVE_BUDGET: Final = ("max_tokens must be at least 1, got -",)
_PATTERNS: Final = re.compile(
    r"input length \(\d+ tokens\) exceeds the maximum allowed length"  # SGLang scheduler
    r"|exceeds the maximum number of tokens: \d+ > \d+"  # SGLang disaggregated
)


def is_context_overflow(status: int | None, error: object, text: str = "") -> bool:
    """Whether a refusal says the prompt does not fit the model's context window.

    ``status`` is the HTTP status (or the one a 200 reply's error object names; ``None``
    when it names none); ``error`` the decoded error member (an object with ``code``,
    ``type``, ``param``, ``message``, or a plain string as TGI sends); ``text`` the raw body text,
    read when ``error`` has no message (a body that is not JSON).
    """
    if status is not None and status not in OVERFLOW_STATUSES:
        return False
    if isinstance(error, Mapping):
        for key in ("code", "type"):
            value = error.get(key)
            if isinstance(value, str) and value.lower() in OVERFLOW_CODES:
                return True
        param = error.get("param")
        if isinstance(param, str) and param.lower() in OVERFLOW_PARAMS:
            return True
        said = error.get("message")
        message = said if isinstance(said, str) else ""
    else:
        message = error if isinstance(error, str) else ""
    lowered = (message or text).lower()
    return (
        any(phrase in lowered for phrase in _PHRASES + _NEGATIVE_BUDGET)
        or _PATTERNS.search(lowered) is not None
    )
