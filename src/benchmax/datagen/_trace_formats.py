"""Reading production logs: four trace formats, detected per file, read one record at a time.

Every format becomes the same thing, a stream of ``LoggedCall``: the chat history a model
was given, the assistant message it logged in reply, whether the call failed, and where
it came from. A record that cannot be read becomes a ``MalformedRecord`` naming its
``file:line``; the stream goes on.

* ``litellm``: LiteLLM's ``StandardLoggingPayload``, one JSON object per line, as its
  loggers write it (``call_type``, ``messages``, ``response``, ``status``, ``session_id``,
  ``end_user``, ``model``, ``startTime``, ``error_str``...; the request's tools under
  ``model_parameters.tools``, else ``tools``).
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

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Literal

import orjson

from benchmax.datagen._errors import DatagenError
from benchmax.datagen._logged_calls import (
    LoggedCall,
    MalformedRecord,
    RecordShapeError,
    finish_reason_of,
    iso_time,
    json_kind,
    messages_of,
    object_of,
    reply_of,
    text_or_none,
)
from benchmax.datagen._otel_spans import otel_calls

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


class TraceFormatError(DatagenError, ValueError):
    """A file is in no known trace format (the message names it and what was expected),
    or cannot be read."""


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


_BOM = b"\xef\xbb\xbf"
"""The UTF-8 byte order mark some Windows tools write before a file's first line."""


def _first_line(path: Path) -> bytes | None:
    with path.open("rb") as file:
        for raw in file:
            raw = raw.removeprefix(_BOM)
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
        if isinstance(record, dict):
            seen = f"has {', '.join(sorted(record)[:8]) or 'no keys'}"
        else:
            seen = f"is {json_kind(record)}, not an object"
        raise TraceFormatError(
            f"{path} is not in a known trace format (its first record {seen}); expected {_EXPECTED}"
        )
    return kind


def _whole_document(path: Path) -> dict[str, object] | None:
    """The file parsed as one JSON document, when it is small enough and is OTLP JSON."""
    try:
        if path.stat().st_size > _WHOLE_DOCUMENT_LIMIT:
            return None
        record = orjson.loads(path.read_bytes().removeprefix(_BOM))
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
            if number == 1:
                raw = raw.removeprefix(_BOM)
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
            if not isinstance(record, dict):
                yield MalformedRecord(label, number, f"{json_kind(record)}, not a JSON object")
                continue
            try:
                calls = list(parse(record, label, number))
            except RecordShapeError as error:
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
        yield from list(otel_calls(record, label, 1))
    except (RecordShapeError, TypeError, ValueError, KeyError, AttributeError) as error:
        yield MalformedRecord(label, 1, str(error))


# ---- litellm ---------------------------------------------------------------------------


def _litellm_calls(record: Mapping[str, object], file: str, line: int) -> Iterator[LoggedCall]:
    if not isinstance(record, dict):
        raise RecordShapeError("not a JSON object")
    failed = record.get("status") == "failure" or bool(record.get("error_str"))
    metadata = object_of(record.get("metadata"))
    user = text_or_none(record.get("end_user")) or text_or_none(
        metadata.get("user_api_key_end_user_id")
    )
    messages = record.get("messages")
    if isinstance(messages, str | dict):  # a prompt string or one message, as LiteLLM may log it
        messages = (
            [{"role": "user", "content": messages}] if isinstance(messages, str) else [messages]
        )
    reply = None if failed else reply_of(record.get("response"))
    if not failed and record.get("response") not in (None, "", {}) and reply is None:
        raise RecordShapeError("response is not a chat-completions reply")
    tools = object_of(record.get("model_parameters")).get("tools") or record.get("tools")
    yield LoggedCall(
        file=file,
        line=line,
        history=messages_of(messages or [], "messages"),
        reply=reply,
        failed=failed,
        model=text_or_none(record.get("model")),
        conversation_id=text_or_none(record.get("session_id")),
        user=user,
        time=iso_time(record.get("startTime")),
        span_id=text_or_none(record.get("id")),
        tools=_tools(tools),
        finish_reason=finish_reason_of(record.get("response")),
    )


def _tools(tools: object) -> tuple[Mapping[str, object], ...]:
    return tuple(t for t in tools if isinstance(t, dict)) if isinstance(tools, list) else ()


# ---- {"request", "response"} -----------------------------------------------------------


def _request_response_calls(
    record: Mapping[str, object], file: str, line: int
) -> Iterator[LoggedCall]:
    request = record.get("request")
    if not isinstance(request, dict):
        raise RecordShapeError("request is not an object")
    response = record.get("response")
    status = record.get("status_code", record.get("status"))
    failed = (
        record.get("error") not in (None, "", {})
        or (isinstance(response, dict) and response.get("error") not in (None, "", {}))
        or (isinstance(status, int) and not isinstance(status, bool) and status >= 400)
        or status in ("error", "failure", "failed")
    )
    reply = None if failed else reply_of(response)
    if not failed and reply is None:
        raise RecordShapeError("response has no assistant message (choices[0].message)")
    metadata = object_of(request.get("metadata"))
    conversation = _conversation_id(record, metadata, metadata.get("session_id"))
    model = text_or_none(response.get("model")) if isinstance(response, dict) else None
    tools = request.get("tools")
    yield LoggedCall(
        file=file,
        line=line,
        history=messages_of(request.get("messages"), "request.messages"),
        reply=reply,
        failed=failed,
        model=model or text_or_none(request.get("model")),
        conversation_id=conversation,
        user=text_or_none(record.get("user")) or text_or_none(request.get("user")),
        time=iso_time(
            record.get("timestamp")
            or record.get("time")
            or (response.get("created") if isinstance(response, dict) else None)
        ),
        span_id=text_or_none(response.get("id")) if isinstance(response, dict) else None,
        tools=_tools(tools),
        finish_reason=finish_reason_of(response),
    )


def _conversation_id(
    record: Mapping[str, object], metadata: Mapping[str, object], fallback: object
) -> str | None:
    """A logged call's conversation: the record's ``conversation_id`` or ``session_id``,
    else its metadata's ``conversation_id``, else ``fallback`` (as ``text_or_none``)."""
    return (
        text_or_none(record.get("conversation_id"))
        or text_or_none(record.get("session_id"))
        or text_or_none(metadata.get("conversation_id"))
        or text_or_none(fallback)
    )


# ---- {"messages": [...]} ---------------------------------------------------------------


def _messages_calls(record: Mapping[str, object], file: str, line: int) -> Iterator[LoggedCall]:
    messages = messages_of(record.get("messages"), "messages")
    metadata = object_of(record.get("metadata"))
    conversation = _conversation_id(record, metadata, record.get("id"))
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
            model=text_or_none(record.get("model")) or text_or_none(metadata.get("model")),
            conversation_id=conversation,
            user=text_or_none(record.get("user")) or text_or_none(metadata.get("user")),
            time=iso_time(record.get("timestamp") or record.get("time")),
            tools=_tools(tools),
        )


_PARSERS = {
    "litellm": _litellm_calls,
    "request-response": _request_response_calls,
    "messages": _messages_calls,
    "otel": otel_calls,
}
