"""What the model sees of an MCP server: its tools as OpenAI function tools, and a tool
result (``CallToolResult``) as tool-message content.

Results map as follows (``MCPServer``'s documentation repeats it for users):

* ``isError: true`` -> ``ToolError`` with the result's text: the model sees the error as
  the tool's output and the rollout goes on (the MCP spec's intent: "so the LLM can see
  and self-correct").
* Content blocks, in order: ``text`` -> its text; ``image`` (and an embedded image
  resource) -> an ``image_url`` part holding a ``data:`` URL; an embedded text resource
  -> its text; audio, other binary resources and resource links -> a one-line text note
  naming what was left out (tool messages carry only text and images).
  Text only -> one string (parts joined by a newline); any image -> a list of parts.
* No content blocks but ``structuredContent`` -> that JSON value (``BaseEnv`` encodes it
  as compact JSON text). When both are present the content blocks win: the spec asks
  servers to mirror structured results as text, which is what a model reads best.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    TextContent,
    Tool,
)

from benchmax._message_content import ContentPart, ImagePart, TextPart
from benchmax.tools._errors import ToolError

__all__ = ["OfferedTool", "offered_tools", "result_content"]

_OPENAI_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_NOT_NAME_CHARACTERS = re.compile(r"[^A-Za-z0-9_-]")
_EMPTY_ERROR = "The tool reported an error without a message."


@dataclass(frozen=True, slots=True)
class OfferedTool:
    """One server tool as offered to the model.

    ``server_name`` is the tool's name on the server; ``function`` the OpenAI
    function-tool dict (its name is the prefix plus the server name, characters an
    OpenAI name cannot hold replaced by ``_``); ``retryable`` whether the server marks
    the tool read-only or idempotent (``annotations.readOnlyHint``/``idempotentHint``).
    """

    server_name: str
    function: dict[str, object]
    retryable: bool

    @property
    def name(self) -> str:
        """The name the model calls the tool by."""
        function = self.function["function"]
        assert isinstance(function, Mapping)
        name = function["name"]
        assert isinstance(name, str)
        return name


def offered_tools(tools: Iterable[Tool], prefix: str, label: str) -> dict[str, OfferedTool]:
    """The server's tools keyed by the name the model calls them by.

    Raises ``ValueError`` when two tools would be offered under one name, or a name
    longer than OpenAI's 64 characters (choose another ``prefix``); ``label`` names
    the server in the message.
    """
    offered: dict[str, OfferedTool] = {}
    for tool in tools:
        name = prefix + _NOT_NAME_CHARACTERS.sub("_", tool.name)
        if not _OPENAI_NAME.fullmatch(name):
            raise ValueError(
                f"MCP server {label}: tool {tool.name!r} would be offered as {name!r}, "
                "longer than the 64 characters a tool name may have"
            )
        if name in offered:
            raise ValueError(
                f"MCP server {label}: tools {offered[name].server_name!r} and {tool.name!r} "
                f"would both be offered as {name!r}"
            )
        function: dict[str, object] = {"name": name, "parameters": tool.input_schema}
        description = tool.description or tool.title
        if description:
            function["description"] = description
        hints = tool.annotations
        retryable = hints is not None and bool(hints.read_only_hint or hints.idempotent_hint)
        offered[name] = OfferedTool(
            server_name=tool.name,
            function={"type": "function", "function": function},
            retryable=retryable,
        )
    return offered


def result_content(result: CallToolResult) -> str | list[ContentPart] | Mapping[str, object]:
    """``result`` as tool-message content (see the module docstring for the mapping).

    Raises ``ToolError`` carrying the result's text when the server flagged it
    ``isError``.
    """
    parts = [part for block in result.content for part in _parts(block)]
    if result.is_error:
        text = "\n".join(part["text"] for part in parts if part["type"] == "text").strip()
        raise ToolError(text or _EMPTY_ERROR)
    if not parts:
        return result.structured_content if result.structured_content is not None else ""
    texts = [part["text"] for part in parts if part["type"] == "text"]
    if len(texts) == len(parts):
        return "\n".join(texts)
    return parts


def _parts(block: ContentBlock) -> list[ContentPart]:
    if isinstance(block, TextContent):
        return [_text(block.text)]
    if isinstance(block, ImageContent):
        return [_image(block.mime_type, block.data)]
    if isinstance(block, AudioContent):
        return [_text(f"[audio ({block.mime_type}, {_decoded_size(block.data)}) not shown]")]
    if isinstance(block, EmbeddedResource):
        resource = block.resource
        if not isinstance(resource, BlobResourceContents):
            return [_text(resource.text)]
        mime_type = resource.mime_type or "application/octet-stream"
        if mime_type.startswith("image/"):
            return [_image(mime_type, resource.blob)]
        size = _decoded_size(resource.blob)
        return [_text(f"[resource {resource.uri} ({mime_type}, {size}) not shown]")]
    return [_text(f"[resource link: {block.name} {block.uri}]")]


def _text(text: str) -> TextPart:
    return {"type": "text", "text": text}


def _image(mime_type: str, data: str) -> ImagePart:
    return {"type": "image_url", "image_url": {"url": f"data:{mime_type};base64,{data}"}}


def _decoded_size(data: str) -> str:
    try:
        return f"{len(base64.b64decode(data, validate=True))} bytes"
    except (binascii.Error, ValueError):
        return "undecodable base64"
