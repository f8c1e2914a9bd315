"""Reading production logs: four trace formats, detected per file, read one record at a time.

Every format becomes the same thing, a stream of ``LoggedCall``: the chat history a model
was given, the assistant message it logged in reply, whether the call failed, and where
it came from. A record that cannot be read becomes a ``MalformedRecord`` naming its
``file:line``; the stream goes on.

* ``litellm``: LiteLLM's ``StandardLoggingPayload``, one JSON object per line, as its
  loggers write it (``call_type``, ``messages``, ``response``, ``status``, ``session_id``,
  ``end_user``, ``model``, ``startTime``, ``error_str``...).
* ``request-response``: ``{"request": {chat-completions body}, "response": {reply body}}``
  per line, with optional ``error``/``status_code``, ``conversation_id``/``session_id``,
  ``user``, ``timestamp``.
* ``messages``: ``{"messages": [...]}`` per line (the fine-tuning format, tool calls
  included): every assistant message is one logged reply to the messages before it.
* ``otel``: OpenTelemetry spans exported as OTLP JSON (``{"resourceSpans": [...]}`` per
  line, or one such document), read through the GenAI semantic conventions
  (``gen_ai.input.messages``, ``gen_ai.output.messages``, ``gen_ai.system_instructions``,
  ``gen_ai.conversation.id``, ``gen_ai.request.model``/``gen_ai.response.model``,
  ``user.id``/``enduser.id``; a span with status ``ERROR`` or ``error.type`` failed).
  Spans without input and output messages (tool or agent spans) are skipped.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson

__all__ = [
    "TRACE_FORMATS",
    "LoggedCall",
    "MalformedRecord",
    "TraceFormat",
    "TraceFormatError",
    "detect_format",
    "read_trace_file",
]

type TraceFormat = Literal["litellm", "request-response", "messages", "otel"]
TRACE_FORMATS: tuple[TraceFormat, ...] = ("litellm", "request-response", "messages", "otel")

_EXPECTED = (
    "LiteLLM standard logging payloads (one JSON object per line with call_type, messages, "
    'response, status), {"request": {...}, "response": {...}} lines, {"messages": [...]} '
    'lines, or OpenTelemetry OTLP JSON ({"resourceSpans": [...]})'
)
_WHOLE_DOCUMENT_LIMIT = 64 * 1024 * 1024
"""An OTLP JSON file that is one pretty-printed document is read whole up to this size."""


class TraceFormatError(ValueError):
    """A file is in no known trace format (the message names it and what was expected),
    or cannot be read."""


@dataclass(frozen=True, slots=True)
class LoggedCall:
    """One logged model reply and what it answered.

    ``history`` is the chat messages the model was given (OpenAI chat shape), ``reply``
    the assistant message it returned (``None`` when the call failed without one).
    ``line`` is the 1-based line of the record, ``span_id`` the OTel span's id;
    ``conversation_id`` and ``user`` are what the log says (``None``: not logged);
    ``time`` is the call's start as an ISO-8601 UTC string.
    """

    file: str
    line: int
    history: tuple[Mapping[str, Any], ...]
    reply: Mapping[str, Any] | None
    failed: bool
    model: str | None = None
    conversation_id: str | None = None
    user: str | None = None
    time: str | None = None
    span_id: str | None = None
    tools: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class MalformedRecord:
    """A record that could not be read: ``file:line: reason``."""

    file: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}"


class _Malformed(Exception):
    """Raised inside a parser for a record of the right format with a bad shape."""


def _kind_of(record: object) -> TraceFormat | None:
    if not isinstance(record, dict):
        return None
    if "resourceSpans" in record:
        return "otel"
    if (
        "call_type" in record
        and "messages" in record
        and ("response" in record or "status" in record)
    ):
        return "litellm"
    if isinstance(record.get("request"), dict) and "response" in record:
        return "request-response"
    if isinstance(record.get("messages"), list):
        return "messages"
    return None


def _first_line(path: Path) -> bytes | None:
    with path.open("rb") as file:
        for raw in file:
            if raw.strip():
                return raw
    return None


def detect_format(path: Path) -> TraceFormat:
    """The format of ``path``, judged by its first non-blank record.

    Raises ``TraceFormatError`` naming the file and the formats expected when the file
    is empty, not JSON, or JSON of no known shape.
    """
    try:
        first = _first_line(path)
    except OSError as error:
        raise TraceFormatError(f"cannot read {path}: {error.strerror or error}") from None
    if first is None:
        raise TraceFormatError(f"{path} is empty; expected {_EXPECTED}")
    try:
        record = orjson.loads(first)
    except orjson.JSONDecodeError:
        record = _whole_document(path)
        if record is None:
            raise TraceFormatError(
                f"{path} is not in a known trace format (its first line is not JSON); "
                f"expected {_EXPECTED}"
            ) from None
    kind = _kind_of(record)
    if kind is None:
        keys = ", ".join(sorted(record)[:8]) if isinstance(record, dict) else type(record).__name__
        raise TraceFormatError(
            f"{path} is not in a known trace format (its first record has {keys or 'no keys'}); "
            f"expected {_EXPECTED}"
        )
    return kind


def _whole_document(path: Path) -> Any:
    """The file parsed as one JSON document, when it is small enough and is OTLP JSON."""
    try:
        if path.stat().st_size > _WHOLE_DOCUMENT_LIMIT:
            return None
        record = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return record if isinstance(record, dict) and "resourceSpans" in record else None


def read_trace_file(
    path: Path,
    kind: TraceFormat,
    *,
    name: str | None = None,
    on_bytes: Callable[[int], None] | None = None,
) -> Iterator[LoggedCall | MalformedRecord]:
    """Every logged reply of ``path`` (in format ``kind``), in file order, streaming.

    ``name`` is the file as records name it (default: ``str(path)``). A line that is not
    JSON, or not a record of ``kind``, yields a ``MalformedRecord``. Blank lines are
    skipped. ``on_bytes(position)`` is called every few thousand lines with the bytes
    of the file read so far.
    """
    label = name or str(path)
    parse = _PARSERS[kind]
    with path.open("rb") as file:
        number = 0
        for raw in file:
            number += 1
            if on_bytes is not None and number % 4096 == 0:
                on_bytes(file.tell())
            if not raw.strip():
                continue
            try:
                record = orjson.loads(raw)
            except orjson.JSONDecodeError as error:
                if number == 1 and kind == "otel":  # one pretty-printed document
                    yield from _whole_otel(path, label)
                    return
                yield MalformedRecord(label, number, f"not JSON ({error})")
                continue
            try:
                calls = list(parse(record, label, number))
            except _Malformed as error:
                yield MalformedRecord(label, number, str(error))
                continue
            except (TypeError, ValueError, KeyError, AttributeError) as error:
                yield MalformedRecord(label, number, f"unexpected shape ({error})")
                continue
            yield from calls


def _whole_otel(path: Path, label: str) -> Iterator[LoggedCall | MalformedRecord]:
    record = _whole_document(path)
    if record is None:
        yield MalformedRecord(label, 1, "not JSON, and not one OTLP JSON document")
        return
    try:
        yield from list(_otel_calls(record, label, 1))
    except (_Malformed, TypeError, ValueError, KeyError, AttributeError) as error:
        yield MalformedRecord(label, 1, str(error))


# ---- shared pieces ---------------------------------------------------------------------


def _messages(value: object, what: str) -> tuple[Mapping[str, Any], ...]:
    if not isinstance(value, list):
        raise _Malformed(f"{what} is not a list of messages")
    for message in value:
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise _Malformed(f"{what} holds an item that is not a chat message")
    return tuple(value)


def _object(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text_or_none(value: object) -> str | None:
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


def _iso_time(value: object) -> str | None:
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


def _reply_of(response: object) -> Mapping[str, Any] | None:
    """The assistant message of a chat-completions response body (or a bare string)."""
    if isinstance(response, str):
        return {"role": "assistant", "content": response} if response else None
    if not isinstance(response, dict):
        return None
    choices = response.get("choices")
    if isinstance(choices, list) and choices:
        message = choices[0].get("message") if isinstance(choices[0], dict) else None
        if isinstance(message, dict):
            return {"role": "assistant", **message}
        return None
    if response.get("role") == "assistant":
        return response
    return None


# ---- litellm ---------------------------------------------------------------------------


def _litellm_calls(record: Mapping[str, Any], file: str, line: int) -> Iterator[LoggedCall]:
    if not isinstance(record, dict):
        raise _Malformed("not a JSON object")
    failed = record.get("status") == "failure" or bool(record.get("error_str"))
    metadata = _object(record.get("metadata"))
    user = _text_or_none(record.get("end_user")) or _text_or_none(
        metadata.get("user_api_key_end_user_id")
    )
    messages = record.get("messages")
    if isinstance(messages, str | dict):  # a prompt string or one message, as LiteLLM may log it
        messages = (
            [{"role": "user", "content": messages}] if isinstance(messages, str) else [messages]
        )
    reply = None if failed else _reply_of(record.get("response"))
    if not failed and record.get("response") not in (None, "", {}) and reply is None:
        raise _Malformed("response is not a chat-completions reply")
    yield LoggedCall(
        file=file,
        line=line,
        history=_messages(messages or [], "messages"),
        reply=reply,
        failed=failed,
        model=_text_or_none(record.get("model")),
        conversation_id=_text_or_none(record.get("session_id")),
        user=user,
        time=_iso_time(record.get("startTime")),
        span_id=_text_or_none(record.get("id")),
    )


# ---- {"request", "response"} -----------------------------------------------------------


def _request_response_calls(
    record: Mapping[str, Any], file: str, line: int
) -> Iterator[LoggedCall]:
    request = record.get("request")
    if not isinstance(request, dict):
        raise _Malformed("request is not an object")
    response = record.get("response")
    status = record.get("status_code", record.get("status"))
    failed = (
        record.get("error") not in (None, "", {})
        or (isinstance(response, dict) and response.get("error") not in (None, "", {}))
        or (isinstance(status, int) and not isinstance(status, bool) and status >= 400)
        or status in ("error", "failure", "failed")
    )
    reply = None if failed else _reply_of(response)
    if not failed and reply is None:
        raise _Malformed("response has no assistant message (choices[0].message)")
    metadata = _object(request.get("metadata"))
    conversation = (
        _text_or_none(record.get("conversation_id"))
        or _text_or_none(record.get("session_id"))
        or _text_or_none(metadata.get("conversation_id"))
        or _text_or_none(metadata.get("session_id"))
    )
    model = _text_or_none(response.get("model")) if isinstance(response, dict) else None
    tools = request.get("tools")
    yield LoggedCall(
        file=file,
        line=line,
        history=_messages(request.get("messages"), "request.messages"),
        reply=reply,
        failed=failed,
        model=model or _text_or_none(request.get("model")),
        conversation_id=conversation,
        user=_text_or_none(record.get("user")) or _text_or_none(request.get("user")),
        time=_iso_time(
            record.get("timestamp")
            or record.get("time")
            or (response.get("created") if isinstance(response, dict) else None)
        ),
        span_id=_text_or_none(response.get("id")) if isinstance(response, dict) else None,
        tools=tuple(t for t in tools if isinstance(t, dict)) if isinstance(tools, list) else (),
    )


# ---- {"messages": [...]} ---------------------------------------------------------------


def _messages_calls(record: Mapping[str, Any], file: str, line: int) -> Iterator[LoggedCall]:
    messages = _messages(record.get("messages"), "messages")
    metadata = _object(record.get("metadata"))
    conversation = (
        _text_or_none(record.get("conversation_id"))
        or _text_or_none(record.get("session_id"))
        or _text_or_none(metadata.get("conversation_id"))
        or _text_or_none(record.get("id"))
    )
    tools = record.get("tools")
    for index, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        yield LoggedCall(
            file=file,
            line=line,
            history=messages[:index],
            reply=message,
            failed=False,
            model=_text_or_none(record.get("model")) or _text_or_none(metadata.get("model")),
            conversation_id=conversation,
            user=_text_or_none(record.get("user")) or _text_or_none(metadata.get("user")),
            time=_iso_time(record.get("timestamp") or record.get("time")),
            tools=tuple(t for t in tools if isinstance(t, dict)) if isinstance(tools, list) else (),
        )


# ---- OpenTelemetry GenAI spans (OTLP JSON) ---------------------------------------------


def _attribute_value(value: object) -> Any:
    """The Python value of an OTLP JSON ``AnyValue``."""
    if not isinstance(value, dict):
        return None
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in value:
            return value[key]
    if "intValue" in value:
        return int(value["intValue"])
    if "arrayValue" in value:
        items = value["arrayValue"].get("values") or []
        return [_attribute_value(item) for item in items]
    if "kvlistValue" in value:
        return _attributes(value["kvlistValue"].get("values") or [])
    return None


def _attributes(items: object) -> dict[str, Any]:
    if not isinstance(items, list):
        return {}
    return {
        item["key"]: _attribute_value(item.get("value"))
        for item in items
        if isinstance(item, dict) and isinstance(item.get("key"), str)
    }


def _json_attribute(value: object, name: str) -> Any:
    if isinstance(value, str):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            raise _Malformed(f"{name} is not JSON") from None
    return value


def _otel_message(message: object, name: str) -> list[dict[str, Any]]:
    """One GenAI message (``{role, parts}``) as chat messages: a ``tool`` message per
    ``tool_call_response`` part, tool calls on the assistant message."""
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        raise _Malformed(f"{name} holds an item that is not a message with a role")
    role = message["role"]
    parts = message.get("parts")
    if parts is None and "content" in message:
        parts = [{"type": "text", "content": message["content"]}]
    if not isinstance(parts, list):
        raise _Malformed(f"{name} holds a message without parts")
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for part in parts:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("content"), str):
            texts.append(part["content"])
        elif kind == "tool_call":
            arguments = part.get("arguments")
            calls.append(
                {
                    "id": str(part.get("id") or f"call_{len(calls)}"),
                    "type": "function",
                    "function": {
                        "name": str(part.get("name") or ""),
                        "arguments": arguments
                        if isinstance(arguments, str)
                        else orjson.dumps(arguments).decode(),
                    },
                }
            )
        elif kind == "tool_call_response":
            response = part.get("response", part.get("result"))
            results.append(
                {
                    "role": "tool",
                    "tool_call_id": str(part.get("id") or ""),
                    "content": response
                    if isinstance(response, str)
                    else orjson.dumps(response).decode(),
                }
            )
    if results:
        return results
    converted: dict[str, Any] = {"role": role, "content": "".join(texts)}
    if calls:
        converted["tool_calls"] = calls
    return [converted]


def _span_call(
    span: Mapping[str, Any], resource: Mapping[str, Any], file: str, line: int
) -> LoggedCall | None:
    attributes = {**resource, **_attributes(span.get("attributes"))}
    if "gen_ai.input.messages" not in attributes or "gen_ai.output.messages" not in attributes:
        return None
    inputs = _json_attribute(attributes["gen_ai.input.messages"], "gen_ai.input.messages")
    outputs = _json_attribute(attributes["gen_ai.output.messages"], "gen_ai.output.messages")
    if not isinstance(inputs, list) or not isinstance(outputs, list):
        raise _Malformed("gen_ai.input.messages and gen_ai.output.messages must be JSON arrays")
    history: list[dict[str, Any]] = []
    system = _json_attribute(
        attributes.get("gen_ai.system_instructions"), "gen_ai.system_instructions"
    )
    if isinstance(system, list):
        text = "".join(
            p["content"]
            for p in system
            if isinstance(p, dict) and isinstance(p.get("content"), str)
        )
        if text:
            history.append({"role": "system", "content": text})
    for message in inputs:
        history.extend(_otel_message(message, "gen_ai.input.messages"))
    replies = [m for message in outputs for m in _otel_message(message, "gen_ai.output.messages")]
    status = _object(span.get("status"))
    code = status.get("code")
    failed = code in (2, "STATUS_CODE_ERROR", "ERROR") or bool(attributes.get("error.type"))
    model = _text_or_none(attributes.get("gen_ai.response.model")) or _text_or_none(
        attributes.get("gen_ai.request.model")
    )
    return LoggedCall(
        file=file,
        line=line,
        history=tuple(history),
        reply=None if failed or not replies else replies[0],
        failed=failed,
        model=model,
        conversation_id=_text_or_none(attributes.get("gen_ai.conversation.id")),
        user=_text_or_none(attributes.get("user.id"))
        or _text_or_none(attributes.get("enduser.id")),
        time=_iso_time(span.get("startTimeUnixNano")),
        span_id=_text_or_none(span.get("spanId")),
    )


def _otel_calls(record: Mapping[str, Any], file: str, line: int) -> Iterator[LoggedCall]:
    resource_spans = record.get("resourceSpans")
    if not isinstance(resource_spans, list):
        raise _Malformed("resourceSpans is not a list")
    for resource_span in resource_spans:
        resource = _attributes((resource_span.get("resource") or {}).get("attributes"))
        for scope in resource_span.get("scopeSpans") or []:
            for span in scope.get("spans") or []:
                if not isinstance(span, dict):
                    raise _Malformed("a span is not an object")
                call = _span_call(span, resource, file, line)
                if call is not None:
                    yield call


_PARSERS = {
    "litellm": _litellm_calls,
    "request-response": _request_response_calls,
    "messages": _messages_calls,
    "otel": _otel_calls,
}
