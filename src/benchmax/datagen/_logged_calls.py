"""What every trace format becomes (``LoggedCall``), and the readings the parsers share."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass

from benchmax.datagen._errors import DatagenError

__all__ = [
    "LoggedCall",
    "MalformedRecord",
    "RecordShapeError",
    "finish_reason_of",
    "iso_time",
    "json_kind",
    "messages_of",
    "object_of",
    "reply_of",
    "text_or_none",
]


@dataclass(frozen=True, slots=True)
class LoggedCall:
    """One logged model reply and what it answered.

    ``history`` is the chat messages the model was given (OpenAI chat shape), ``reply``
    the assistant message it returned (``None`` when the call failed without one).
    ``line`` is the 1-based line of the record, ``span_id`` the OTel span's id;
    ``conversation_id`` and ``user`` are what the log says (``None``: not logged);
    ``time`` is the call's start as an ISO-8601 UTC string. ``finish_reason`` is the
    reply's as logged (``"length"`` when the output limit cut it), ``unsupported`` names
    what of the call has no chat-completions equivalent (a file part, audio), which
    keeps it from becoming a row.
    """

    file: str
    line: int
    history: tuple[Mapping[str, object], ...]
    reply: Mapping[str, object] | None
    failed: bool
    model: str | None = None
    conversation_id: str | None = None
    user: str | None = None
    time: str | None = None
    span_id: str | None = None
    tools: tuple[Mapping[str, object], ...] = ()
    finish_reason: str | None = None
    unsupported: str | None = None


@dataclass(frozen=True, slots=True)
class MalformedRecord:
    """A record that could not be read: ``file:line: reason``."""

    file: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}"


class RecordShapeError(DatagenError):
    """Raised inside a parser for a record of the right format with a bad shape."""


def messages_of(value: object, what: str) -> tuple[Mapping[str, object], ...]:
    """``value`` as chat messages; raises ``RecordShapeError`` when it is not a list of
    objects with a string ``role``, or a message's ``content`` is not a string, ``null`` or
    a list of content parts (objects), or its ``tool_calls`` is not a list of objects."""
    if not isinstance(value, list):
        raise RecordShapeError(f"{what} is not a list of messages")
    for message in value:
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise RecordShapeError(f"{what} holds an item that is not a chat message")
        _check_fields(message, f"{what} holds a message whose")
    return tuple(value)


def _check_fields(message: Mapping[str, object], whose: str) -> None:
    content = message.get("content")
    if not (content is None or isinstance(content, str) or _objects(content)):
        raise RecordShapeError(
            f"{whose} content is {json_kind(content)} "
            "(expected text, null or a list of content parts)"
        )
    calls = message.get("tool_calls")
    if calls is not None and not _objects(calls):
        raise RecordShapeError(
            f"{whose} tool_calls is {json_kind(calls)} (expected a list of tool calls)"
        )


def _objects(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)


def json_kind(value: object) -> str:
    """What a parsed JSON value is, for messages: ``an object``, ``an array``, ``null``..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def object_of(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


def text_or_none(value: object) -> str | None:
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


def iso_time(value: object) -> str | None:
    """An ISO-8601 UTC time from epoch seconds, milliseconds, nanoseconds or a string."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return str(value) or None
    if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
        return None
    seconds = float(value)
    while seconds > 1e11:  # milliseconds, microseconds or nanoseconds
        seconds /= 1000
    try:
        moment = dt.datetime.fromtimestamp(seconds, dt.UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def finish_reason_of(response: object) -> str | None:
    """The finish reason of a chat-completions response body's first choice."""
    if not isinstance(response, dict):
        return None
    choices = response.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        return text_or_none(choices[0].get("finish_reason"))
    return text_or_none(response.get("finish_reason") or response.get("stop_reason"))


def reply_of(response: object) -> Mapping[str, object] | None:
    """The assistant message of a chat-completions response body (or a bare string);
    raises ``RecordShapeError`` when its content or tool calls have the wrong shape."""
    if isinstance(response, str):
        return {"role": "assistant", "content": response} if response else None
    if not isinstance(response, dict):
        return None
    choices = response.get("choices")
    if isinstance(choices, list) and choices:
        message = choices[0].get("message") if isinstance(choices[0], dict) else None
        if isinstance(message, dict):
            _check_fields(message, "the response's message")
            return {"role": "assistant", **message}
        return None
    if response.get("role") == "assistant":
        _check_fields(response, "the response's message")
        return response
    return None
