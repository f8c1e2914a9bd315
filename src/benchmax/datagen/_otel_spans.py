"""OpenTelemetry GenAI spans exported as OTLP JSON, read through the semantic conventions.

A span with ``gen_ai.input.messages`` and ``gen_ai.output.messages`` (JSON arrays of
``{role, parts}`` messages with ``text``, ``tool_call`` and ``tool_call_response`` parts)
is one logged call; ``gen_ai.system_instructions`` opens its history. An image part
(``blob`` with base64 ``content``, or ``uri``, whose ``modality`` is ``image`` or whose
``mime_type`` is ``image/*``) becomes an ``image_url`` content part (a ``data:`` URL for a
blob), so the message keeps its text and images in order; ``reasoning`` parts are left
out (reasoning is never a ground truth). A part with no chat-completions equivalent (a
``file`` id, audio or video, an image in a reply, an unknown type) marks the call
``unsupported``: it becomes no row (counted), never a silently text-only one. The finish
reason is the first output message's ``finish_reason``, else the first of
``gen_ai.response.finish_reasons``. The conversation is
``gen_ai.conversation.id``, the model ``gen_ai.response.model`` (else
``gen_ai.request.model``), the user ``user.id`` or ``enduser.id``; status ``ERROR`` or an
``error.type`` attribute marks a failed call. Other spans (tools, agents) are skipped.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import orjson

from benchmax._message_content import ContentPart, ImagePart
from benchmax.datagen._logged_calls import (
    LoggedCall,
    RecordShapeError,
    iso_time,
    object_of,
    text_or_none,
)

__all__ = ["otel_calls"]


def _attribute_value(value: object) -> object:
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


def _attributes(items: object) -> dict[str, object]:
    if not isinstance(items, list):
        return {}
    return {
        item["key"]: _attribute_value(item.get("value"))
        for item in items
        if isinstance(item, dict) and isinstance(item.get("key"), str)
    }


def _json_attribute(value: object, name: str) -> object:
    if isinstance(value, str):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            raise RecordShapeError(f"{name} is not JSON") from None
    return value


def _otel_message(message: object, name: str, unsupported: list[str]) -> list[dict[str, object]]:
    """One GenAI message (``{role, parts}``) as chat messages: a ``tool`` message per
    ``tool_call_response`` part, tool calls on the assistant message, images as
    ``image_url`` parts; what cannot be carried over is named in ``unsupported``."""
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        raise RecordShapeError(f"{name} holds an item that is not a message with a role")
    role = message["role"]
    parts = message.get("parts")
    if parts is None and "content" in message:
        parts = [{"type": "text", "content": message["content"]}]
    if not isinstance(parts, list):
        raise RecordShapeError(f"{name} holds a message without parts")
    content: list[ContentPart] = []
    calls: list[dict[str, object]] = []
    results: list[dict[str, object]] = []
    for part in parts:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        text = part.get("content")
        if kind == "text" and isinstance(text, str):
            content.append({"type": "text", "text": text})
        elif kind == "reasoning":
            continue
        elif kind in ("blob", "uri", "image"):
            image = _image_part(part)
            if image is None:
                unsupported.append(f"a {_media(part)} {kind} part in {name}")
            else:
                content.append(image)
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
        else:
            unsupported.append(f"a {kind!s:.40} part in {name}")
    if results:
        return results
    converted: dict[str, object] = {"role": role, "content": _content(content)}
    if calls:
        converted["tool_calls"] = calls
    return [converted]


def _content(parts: list[ContentPart]) -> str | list[ContentPart]:
    """Text parts alone as one string (as logged before images were read); otherwise the
    parts in order."""
    texts = [part["text"] for part in parts if part["type"] == "text"]
    if len(texts) == len(parts):
        return "".join(texts)
    return parts


def _media(part: Mapping[str, object]) -> str:
    modality = part.get("modality")
    if isinstance(modality, str) and modality:
        return modality[:20]
    mime = part.get("mime_type")
    return str(mime)[:40] if isinstance(mime, str) and mime else "media"


def _image_part(part: Mapping[str, object]) -> ImagePart | None:
    """An ``image_url`` part for an image blob or URI, else ``None``."""
    mime = str(part["mime_type"]) if isinstance(part.get("mime_type"), str) else ""
    if not (part.get("modality") == "image" or mime.startswith("image/")):
        return None
    uri = part.get("uri")
    if part.get("type") == "uri" and isinstance(uri, str) and uri:
        return {"type": "image_url", "image_url": {"url": uri}}
    data = part.get("content", part.get("data"))
    if isinstance(data, str) and data:
        kind = mime or "image/png"
        return {"type": "image_url", "image_url": {"url": f"data:{kind};base64,{data}"}}
    return None


def _span_call(
    span: Mapping[str, object], resource: Mapping[str, object], file: str, line: int
) -> LoggedCall | None:
    attributes = {**resource, **_attributes(span.get("attributes"))}
    if "gen_ai.input.messages" not in attributes or "gen_ai.output.messages" not in attributes:
        return None
    inputs = _json_attribute(attributes["gen_ai.input.messages"], "gen_ai.input.messages")
    outputs = _json_attribute(attributes["gen_ai.output.messages"], "gen_ai.output.messages")
    if not isinstance(inputs, list) or not isinstance(outputs, list):
        raise RecordShapeError(
            "gen_ai.input.messages and gen_ai.output.messages must be JSON arrays"
        )
    history: list[dict[str, object]] = []
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
    unsupported: list[str] = []
    for message in inputs:
        history.extend(_otel_message(message, "gen_ai.input.messages", unsupported))
    replies = [
        m
        for message in outputs
        for m in _otel_message(message, "gen_ai.output.messages", unsupported)
    ]
    if replies and not isinstance(replies[0].get("content"), str):
        unsupported.append("an image in the reply (gen_ai.output.messages)")
    status = object_of(span.get("status"))
    code = status.get("code")
    failed = code in (2, "STATUS_CODE_ERROR", "ERROR") or bool(attributes.get("error.type"))
    model = text_or_none(attributes.get("gen_ai.response.model")) or text_or_none(
        attributes.get("gen_ai.request.model")
    )
    return LoggedCall(
        file=file,
        line=line,
        history=tuple(history),
        reply=None if failed or not replies else replies[0],
        failed=failed,
        model=model,
        conversation_id=text_or_none(attributes.get("gen_ai.conversation.id")),
        user=text_or_none(attributes.get("user.id")) or text_or_none(attributes.get("enduser.id")),
        time=iso_time(span.get("startTimeUnixNano")),
        span_id=text_or_none(span.get("spanId")),
        finish_reason=_finish_reason(outputs, attributes.get("gen_ai.response.finish_reasons")),
        unsupported="; ".join(unsupported) or None,
    )


def _finish_reason(outputs: list[object], reasons: object) -> str | None:
    first = outputs[0] if outputs and isinstance(outputs[0], dict) else {}
    if isinstance(first.get("finish_reason"), str) and first["finish_reason"]:
        return str(first["finish_reason"])
    if isinstance(reasons, str):  # a JSON array kept as a string
        text = reasons
        try:
            reasons = orjson.loads(text)
        except orjson.JSONDecodeError:
            return text or None
    if isinstance(reasons, list) and reasons and isinstance(reasons[0], str):
        return str(reasons[0])
    return None


def otel_calls(record: Mapping[str, object], file: str, line: int) -> Iterator[LoggedCall]:
    resource_spans = record.get("resourceSpans")
    if not isinstance(resource_spans, list):
        raise RecordShapeError("resourceSpans is not a list")
    for resource_span in resource_spans:
        resource = _attributes((resource_span.get("resource") or {}).get("attributes"))
        for scope in resource_span.get("scopeSpans") or []:
            for span in scope.get("spans") or []:
                if not isinstance(span, dict):
                    raise RecordShapeError("a span is not an object")
                call = _span_call(span, resource, file, line)
                if call is not None:
                    yield call
