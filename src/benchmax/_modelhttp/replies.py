"""Reading one decoded chat-completions reply: transcript message, tool calls, outcome, usage.

Everything a server sends is data (``beyond.md`` §7): :func:`read_reply` never raises on
a decoded JSON value. What has one clear meaning is normalized; anything else comes back
as a :class:`ReplyFailure` (termination reason ``model_error``) whose ``message`` names
the field and shows a size-bounded repr of the value found there.

Normalization of the first choice's ``message``:

* ``content`` is kept as sent: a string, ``null`` or a list of content parts (a missing
  key is ``null``); any other value is a failure.
* ``reasoning_content`` and ``reasoning`` (when present and not ``null``) are kept as
  sent, after ``content``, in :attr:`Reply.message`; :attr:`Reply.message_without_reasoning`
  is the 0.2 message (role, content, tool_calls).
* ``tool_calls``: ``null``/missing/``[]`` is no calls; anything but a list is a failure.
  A call with no ``type`` (or ``null``) is a function call; another ``type``, a
  ``function`` that is not an object, or a ``name`` that is not a string is a failure.
  ``arguments`` given as a JSON value other than a string is used as that value and
  recorded as its compact JSON text; missing or ``null`` arguments are ``"{}"``.
* A call ``id`` that is missing, not a string, empty, or already used (earlier in the
  reply or in ``taken_ids``, the rollout's earlier calls) becomes ``call_<n>``, unique
  within the rollout. The same id is used in the assistant message and for the tool
  message that answers the call.

A reply with tool calls whose ``finish_reason`` is of the output-limit family (maps to
``output_exceeded``, e.g. ``length``) was cut while writing them: it ends the rollout as
``output_exceeded`` and its calls (whose arguments may be truncated JSON) are never run
(``beyond.md`` §9). With no tool calls, ``finish_reason`` maps through :data:`FINISH_REASONS`
(case-insensitive, extended or overridden per environment): ``null`` or ``""`` is
``finished`` when the message has non-empty text, else ``model_error``; an unmapped
value is ``model_error``. Every mapping except ``stop`` carries a :attr:`Reply.finish_note`
for the log.
"""

from __future__ import annotations

import itertools
import json
import reprlib
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from benchmax._message_content import content_text
from benchmax._modelhttp.errors import ModelHTTPError
from benchmax._value_checks import is_int_at_least, is_non_empty_str
from benchmax._vocabulary import (
    CONTENT_FILTER,
    FINISHED,
    MODEL_ERROR,
    OUTPUT_EXCEEDED,
    TOKEN_USAGE_KEYS,
)

__all__ = [
    "FINISH_REASONS",
    "REASONING_FIELDS",
    "Reply",
    "ReplyFailure",
    "ToolCall",
    "add_usage",
    "bounded_repr",
    "finish_reason_table",
    "message_has_text",
    "read_reply",
    "reply_usage",
    "reply_weights_version",
]

FINISH_REASONS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "stop": FINISHED,
        "eos": FINISHED,
        "eos_token": FINISHED,
        "end_turn": FINISHED,
        "stop_sequence": FINISHED,
        "length": OUTPUT_EXCEEDED,
        "max_tokens": OUTPUT_EXCEEDED,
        "model_length": OUTPUT_EXCEEDED,
        "max_output_tokens": OUTPUT_EXCEEDED,
        "content_filter": CONTENT_FILTER,
        "safety": CONTENT_FILTER,
        "recitation": CONTENT_FILTER,
        "prohibited_content": CONTENT_FILTER,
        "error": MODEL_ERROR,
        "tool_calls": FINISHED,
        "function_call": FINISHED,
    }
)
"""Default ``finish_reason`` (lower case) -> termination reason, for replies without tool calls."""

REASONING_FIELDS: Final = ("reasoning_content", "reasoning")
"""Reply message fields holding the model's reasoning, kept in the transcript."""

_USAGE_DETAILS: Final = {
    "reasoning_tokens": "completion_tokens_details",
    "cached_tokens": "prompt_tokens_details",
}
"""The usage keys a reply reports inside a details object, and that object's name."""
_REPR_LIMIT: Final = 300
_MESSAGE: Final = "choices[0].message"


class _BoundedRepr(reprlib.Repr):
    """``reprlib.Repr`` showing dict items in their order (as the server sent them)."""

    def repr_dict(self, x: dict[Any, Any], level: int) -> str:
        if not x:
            return "{}"
        if level <= 0:
            return "{" + self.fillvalue + "}"
        pieces = [
            f"{self.repr1(key, level - 1)}: {self.repr1(value, level - 1)}"
            for key, value in itertools.islice(x.items(), self.maxdict)
        ]
        if len(x) > self.maxdict:
            pieces.append(self.fillvalue)
        return "{" + ", ".join(pieces) + "}"


_repr = _BoundedRepr(
    maxlevel=4,
    maxdict=6,
    maxlist=6,
    maxtuple=6,
    maxset=6,
    maxstring=120,
    maxlong=60,
    maxother=120,
)


def bounded_repr(value: object, limit: int = _REPR_LIMIT) -> str:
    """``repr(value)`` abridged to at most about ``limit`` characters (nested values too)."""
    text = _repr.repr(value)
    if len(text) > limit:
        text = f"{text[: limit - 3]}..."
    return text


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function tool call of a reply, normalized.

    ``arguments`` is the parsed JSON object (keyword arguments for ``run_tool``) or,
    when the arguments cannot be used, the text of the tool message to answer with
    (``"Invalid JSON tool arguments: ..."``, ``"Tool arguments must be a JSON object."``).
    """

    id: str
    name: str
    arguments: dict[str, object] | str


@dataclass(frozen=True, slots=True)
class Reply:
    """A usable reply.

    ``message`` is the assistant message for the rollout's transcript (keys ``role``,
    ``content``, any reasoning fields, then ``tool_calls`` when there are calls);
    ``message_without_reasoning`` is the same message without the reasoning fields (the
    same object when there are none). ``termination_reason`` is ``None`` when the reply's
    tool calls are to be run, else the outcome of ``finish_reason`` (the raw value, as
    sent), with ``finish_note`` saying why for every mapping but ``stop``; a reply cut by
    the output limit inside tool calls is ``output_exceeded`` (its calls never run).
    ``usage`` holds the token counts the reply reported (``None``: none).
    """

    message: dict[str, object]
    message_without_reasoning: dict[str, object]
    tool_calls: tuple[ToolCall, ...]
    termination_reason: str | None
    finish_reason: object
    finish_note: str | None
    usage: Mapping[str, int] | None


@dataclass(frozen=True, slots=True)
class ReplyFailure:
    """A reply that cannot continue the rollout: ``message`` says which field and why."""

    message: str
    usage: Mapping[str, int] | None = None
    termination_reason: str = MODEL_ERROR


class _Unusable(ModelHTTPError):
    """A field of the reply has no usable meaning (internal: becomes a ``ReplyFailure``)."""

    def __init__(self, field: str, expected: str, value: object) -> None:
        super().__init__(f"{field} must be {expected}, got {bounded_repr(value)}")


def finish_reason_table(overrides: object) -> Mapping[str, str]:
    """:data:`FINISH_REASONS` extended or overridden by an environment's ``finish_reasons``.

    Keys are matched case-insensitively. Raises ``TypeError`` when ``overrides`` is not
    a mapping with string keys and ``ValueError`` when a value is not a non-empty
    string (a termination reason).
    """
    if not isinstance(overrides, Mapping):
        raise TypeError("finish_reasons must be a mapping of finish_reason values to reasons")
    if not overrides:
        return FINISH_REASONS
    table = dict(FINISH_REASONS)
    for key, value in overrides.items():
        if not isinstance(key, str):
            raise TypeError("finish_reasons keys must be strings")
        if not is_non_empty_str(value):
            raise ValueError(
                f"finish_reasons[{key!r}] must be a termination reason (a non-empty string)"
            )
        table[key.lower()] = value
    return MappingProxyType(table)


def message_has_text(content: object) -> bool:
    """Whether message ``content`` holds text, read by the one rule every reader uses
    (``benchmax.rewards.text.message_text``)."""
    return bool(content_text(content))


def _count(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return None


def reply_usage(body: object) -> dict[str, int] | None:
    """Token counts a decoded reply reports, or ``None`` when it reports none.

    Keys among ``prompt_tokens``, ``completion_tokens``, ``total_tokens``,
    ``reasoning_tokens`` (``completion_tokens_details``) and ``cached_tokens``
    (``prompt_tokens_details``); a count that is missing or not a non-negative
    integer is left out, never taken as 0.
    """
    if not isinstance(body, Mapping):
        return None
    usage = body.get("usage")
    if not isinstance(usage, Mapping):
        return None
    counts: dict[str, int] = {}
    for key in TOKEN_USAGE_KEYS:
        section = _USAGE_DETAILS.get(key)
        holder = usage if section is None else usage.get(section)
        if isinstance(holder, Mapping):
            count = _count(holder.get(key))
            if count is not None:
                counts[key] = count
    return counts or None


def reply_weights_version(body: object) -> int | None:
    """The ``weights_version`` a decoded reply reports (``benchmax train``'s sampler: the
    version of the weights that sampled it), or ``None`` when it reports none or a value
    that is not a non-negative integer."""
    if not isinstance(body, Mapping):
        return None
    version = body.get("weights_version")
    return version if is_int_at_least(version, 0) else None


def add_usage(
    total: Mapping[str, int] | None, more: Mapping[str, int] | None
) -> dict[str, int] | None:
    """Key-wise sum of two usages; a key is present when either has it (``None``: none)."""
    if more is None:
        return None if total is None else dict(total)
    summed = dict(total or {})
    for key, count in more.items():
        summed[key] = summed.get(key, 0) + count
    return summed


def read_reply(
    body: object,
    *,
    taken_ids: Collection[str] = (),
    finish_reasons: Mapping[str, str] = FINISH_REASONS,
) -> Reply | ReplyFailure:
    """Normalize a decoded 200 reply (any JSON value); see the module docs for the rules.

    ``taken_ids`` are the tool-call ids already used in the rollout (new ids avoid them);
    ``finish_reasons`` is the table from :func:`finish_reason_table`.
    """
    usage = reply_usage(body)
    try:
        return _read(body, taken_ids, finish_reasons, usage)
    except _Unusable as problem:
        return ReplyFailure(str(problem), usage)


def _read(
    body: object,
    taken_ids: Collection[str],
    finish_reasons: Mapping[str, str],
    usage: dict[str, int] | None,
) -> Reply | ReplyFailure:
    if not isinstance(body, Mapping):
        raise _Unusable("the response", "a JSON object", body)
    choices = body.get("choices")
    if choices is None or (isinstance(choices, list) and not choices):
        error = body.get("error")
        if error is not None:
            return ReplyFailure(
                f"response contained no choices; error: {bounded_repr(error)}", usage
            )
        return ReplyFailure("response contained no choices", usage)
    if not isinstance(choices, list):
        raise _Unusable("choices", "a list", choices)
    choice = choices[0]
    if not isinstance(choice, Mapping):
        raise _Unusable("choices[0]", "an object", choice)
    message = choice.get("message")
    if not isinstance(message, Mapping):
        raise _Unusable(_MESSAGE, "an object", message)
    content = message.get("content")
    if content is not None and not isinstance(content, str | list):
        raise _Unusable(f"{_MESSAGE}.content", "a string, null or a list of parts", content)
    raw_calls = message.get("tool_calls")
    if raw_calls is None:
        raw_calls = []
    elif not isinstance(raw_calls, list):
        raise _Unusable(f"{_MESSAGE}.tool_calls", "a list", raw_calls)
    calls, transcript_calls = _tool_calls(raw_calls, taken_ids)

    plain: dict[str, object] = {"role": "assistant", "content": content}
    reasoning = {key: message[key] for key in REASONING_FIELDS if message.get(key) is not None}
    full = {**plain, **reasoning} if reasoning else plain
    if calls:
        plain["tool_calls"] = transcript_calls
        if reasoning:
            full["tool_calls"] = transcript_calls
    finish_reason = choice.get("finish_reason")
    if calls:
        if _cut_by_output_limit(finish_reason, finish_reasons):
            cut = f"finish_reason {bounded_repr(finish_reason)} cut the reply inside tool calls"
            return Reply(full, plain, calls, "output_exceeded", finish_reason, cut, usage)
        return Reply(full, plain, calls, None, finish_reason, None, usage)
    reason, note = _finish_outcome(finish_reason, content, finish_reasons)
    return Reply(full, plain, calls, reason, finish_reason, note, usage)


def _tool_calls(
    raw_calls: list[Any], taken_ids: Collection[str]
) -> tuple[tuple[ToolCall, ...], list[dict[str, object]]]:
    read: list[tuple[object, str, str, dict[str, object] | str]] = []
    for index, call in enumerate(raw_calls):
        where = f"{_MESSAGE}.tool_calls[{index}]"
        if not isinstance(call, Mapping):
            raise _Unusable(where, "an object", call)
        call_type = call.get("type")
        if call_type is not None and call_type != "function":
            raise _Unusable(f"{where}.type", "'function' (a function tool call)", call_type)
        function = call.get("function")
        if not isinstance(function, Mapping):
            raise _Unusable(f"{where}.function", "an object", function)
        name = function.get("name")
        if not isinstance(name, str):
            raise _Unusable(f"{where}.function.name", "a string", name)
        text, arguments = _arguments(function.get("arguments"), f"{where}.function.arguments")
        read.append((call.get("id"), name, text, arguments))
    ids = _call_ids([raw_id for raw_id, *_ in read], taken_ids)
    calls = tuple(
        ToolCall(id=call_id, name=name, arguments=arguments)
        for call_id, (_, name, _, arguments) in zip(ids, read, strict=True)
    )
    transcript: list[dict[str, object]] = [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}
        for call_id, (_, name, text, _) in zip(ids, read, strict=True)
    ]
    return calls, transcript


def _arguments(raw: object, where: str) -> tuple[str, dict[str, object] | str]:
    """The arguments' transcript text, and the parsed object or the tool message to send."""
    if raw is None:
        return "{}", {}
    if isinstance(raw, str):
        text = raw
        try:
            parsed = json.loads(raw or "{}")
        except json.JSONDecodeError as error:
            return text, f"Invalid JSON tool arguments: {error.msg}"
        except RecursionError:
            return text, "Invalid JSON tool arguments: nested too deeply"
    else:
        parsed = raw
        try:
            text = json.dumps(raw, ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError, RecursionError):
            raise _Unusable(where, "JSON text or a JSON value", raw) from None
    if not isinstance(parsed, dict):
        return text, "Tool arguments must be a JSON object."
    return text, parsed


def _call_ids(raw_ids: list[object], taken_ids: Collection[str]) -> list[str]:
    used = set(taken_ids)
    kept: list[str | None] = []
    for raw in raw_ids:
        if isinstance(raw, str) and raw and raw not in used:
            used.add(raw)
            kept.append(raw)
        else:
            kept.append(None)
    number = len(taken_ids)
    ids: list[str] = []
    for call_id in kept:
        if call_id is None:
            number += 1
            while f"call_{number}" in used:
                number += 1
            call_id = f"call_{number}"
            used.add(call_id)
        ids.append(call_id)
    return ids


def _cut_by_output_limit(finish_reason: object, table: Mapping[str, str]) -> bool:
    """Whether ``finish_reason`` is of the output-limit family (maps to ``output_exceeded``)."""
    return isinstance(finish_reason, str) and table.get(finish_reason.lower()) == "output_exceeded"


def _finish_outcome(
    finish_reason: object, content: object, table: Mapping[str, str]
) -> tuple[str, str | None]:
    shown = bounded_repr(finish_reason)
    key = finish_reason.lower() if isinstance(finish_reason, str) else None
    if key is not None and key in table:
        reason = table[key]
        if key == "stop" and reason == FINISHED:
            return reason, None
        return reason, f"finish_reason {shown} maps to {reason}"
    if finish_reason is None or key == "":
        if message_has_text(content):
            return FINISHED, f"finish_reason {shown} with message text"
        return MODEL_ERROR, f"finish_reason {shown} and no message text"
    return MODEL_ERROR, f"finish_reason {shown} is not in the finish_reason table"
