"""Tool calls of one assistant turn: names, argument parsing, result content."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "ToolTimedOut",
    "advertised_tool_names",
    "assistant_message",
    "function_tool_calls",
    "tool_arguments",
    "tool_content",
]

_CONTENT_PART_TYPES = ("text", "image_url")


class ToolTimedOut(Exception):
    """A ``run_tool`` call outlived ``tool_timeout``."""

    def __init__(self, tool_name: str, seconds: float) -> None:
        super().__init__(f"tool {tool_name!r} exceeded tool_timeout of {seconds:g}s")


def advertised_tool_names(tools: Sequence[Any]) -> frozenset[str]:
    """Names of the function tools in ``tools`` (other entries are ignored)."""
    names: set[str] = set()
    for tool in tools:
        if not isinstance(tool, Mapping):
            continue
        function = tool.get("function")
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            names.add(function["name"])
    return frozenset(names)


def function_tool_calls(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The message's tool calls; anything but function tool calls is a contract error."""
    calls = list(message.get("tool_calls") or [])
    for call in calls:
        if (
            not isinstance(call, Mapping)
            or call.get("type") != "function"
            or not isinstance(call.get("function"), Mapping)
        ):
            raise TypeError("BaseEnv supports function tool calls only")
    return calls


def assistant_message(
    message: Mapping[str, Any], calls: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The transcript entry for an assistant reply: role, content, and any tool calls."""
    entry: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if calls:
        entry["tool_calls"] = [
            {
                "id": call.get("id"),
                "type": "function",
                "function": {
                    "name": call["function"].get("name"),
                    "arguments": call["function"].get("arguments"),
                },
            }
            for call in calls
        ]
    return entry


def tool_arguments(raw: str | None) -> dict[str, Any] | str:
    """Parsed keyword arguments, or the tool message to send back instead."""
    try:
        parsed = json.loads(raw or "{}")
    except json.JSONDecodeError as error:
        return f"Invalid JSON tool arguments: {error.msg}"
    if not isinstance(parsed, dict):
        return "Tool arguments must be a JSON object."
    return parsed


def tool_content(result: Any) -> str | list[Any]:
    """A tool result as tool-message content: content parts pass through, the rest is text."""
    if (
        isinstance(result, list | tuple)
        and result
        and all(
            isinstance(part, Mapping) and part.get("type") in _CONTENT_PART_TYPES for part in result
        )
    ):
        return list(result)
    if result is None:
        return ""
    if isinstance(result, str):
        return result
    if isinstance(result, Mapping | list | tuple | int | float):
        return json.dumps(result, ensure_ascii=False, separators=(",", ":"))
    return str(result)
