"""How MCP tool listings and results become what the model sees (every content kind,
including those the test server does not produce)."""

from __future__ import annotations

import base64

import pytest
from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
    Tool,
    ToolAnnotations,
)

from benchmax.tools import ToolError
from benchmax.tools._mcp_content import offered_tools, result_content

PNG = base64.b64encode(b"\x89PNG-bytes").decode()
SCHEMA = {"type": "object", "properties": {}}
OCTETS = "application/octet-stream"


def result(*content: object, structured: object = None, error: bool = False) -> CallToolResult:
    return CallToolResult(content=list(content), structured_content=structured, is_error=error)  # type: ignore[arg-type]


def test_text_blocks_join_and_images_make_a_parts_list() -> None:
    text = result(TextContent(type="text", text="a"), TextContent(type="text", text="b"))
    assert result_content(text) == "a\nb"
    mixed = result(
        TextContent(type="text", text="see"),
        ImageContent(type="image", data=PNG, mime_type="image/png"),
    )
    assert result_content(mixed) == [
        {"type": "text", "text": "see"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
    ]


def test_structured_content_is_used_only_without_content_blocks() -> None:
    assert result_content(result(structured={"rows": [1, 2]})) == {"rows": [1, 2]}
    both = result(TextContent(type="text", text='{"rows": [1, 2]}'), structured={"rows": [1, 2]})
    assert result_content(both) == '{"rows": [1, 2]}'
    assert result_content(result()) == ""


def test_resources_audio_and_links_become_text_or_images() -> None:
    embedded_text = EmbeddedResource(
        type="resource", resource=TextResourceContents(uri="file:///a.txt", text="hello")
    )
    embedded_image = EmbeddedResource(
        type="resource",
        resource=BlobResourceContents(uri="file:///a.png", blob=PNG, mime_type="image/png"),
    )
    embedded_blob = EmbeddedResource(
        type="resource",
        resource=BlobResourceContents(uri="file:///a.bin", blob=base64.b64encode(b"1234").decode()),
    )
    audio = AudioContent(
        type="audio", data=base64.b64encode(b"RIFF").decode(), mime_type="audio/wav"
    )
    link = ResourceLink(type="resource_link", name="report", uri="file:///report.pdf")
    parts = result_content(result(embedded_text, embedded_image, embedded_blob, audio, link))
    assert parts == [
        {"type": "text", "text": "hello"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        {"type": "text", "text": f"[resource file:///a.bin ({OCTETS}, 4 bytes) not shown]"},
        {"type": "text", "text": "[audio (audio/wav, 4 bytes) not shown]"},
        {"type": "text", "text": "[resource link: report file:///report.pdf]"},
    ]  # fmt: skip


def test_is_error_raises_tool_error_with_the_text() -> None:
    with pytest.raises(ToolError, match=r"^disk full$"):
        result_content(result(TextContent(type="text", text="disk full"), error=True))
    with pytest.raises(ToolError, match="without a message"):
        result_content(result(error=True))


def test_offered_names_prefix_sanitize_and_retryable_hints() -> None:
    tools = [
        Tool(
            name="read.file", input_schema=SCHEMA, annotations=ToolAnnotations(read_only_hint=True)
        ),
        Tool(name="put", input_schema=SCHEMA, annotations=ToolAnnotations(idempotent_hint=True)),
        Tool(name="delete", input_schema=SCHEMA, title="Delete a file"),
    ]
    offered = offered_tools(tools, "fs_", "srv")
    assert list(offered) == ["fs_read_file", "fs_put", "fs_delete"]
    assert offered["fs_read_file"].server_name == "read.file"
    assert [tool.retryable for tool in offered.values()] == [True, True, False]
    assert offered["fs_delete"].function["function"]["description"] == "Delete a file"
    clash = [Tool(name="a.b", input_schema=SCHEMA), Tool(name="a_b", input_schema=SCHEMA)]
    with pytest.raises(ValueError, match="would both be offered as 'a_b'"):
        offered_tools(clash, "", "srv")
    with pytest.raises(ValueError, match="64 characters"):
        offered_tools([Tool(name="x" * 64, input_schema=SCHEMA)], "p_", "srv")
