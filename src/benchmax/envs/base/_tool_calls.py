"""Tool calls of one assistant turn: advertised names, reserved arguments, result content."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "RESERVED_ARGUMENT_NAMES",
    "ToolTimedOut",
    "advertised_tool_names",
    "reserved_argument_message",
    "tool_content",
]

RESERVED_ARGUMENT_NAMES = ("rollout_id", "tool_name")
"""``run_tool``'s own parameters: a model cannot pass arguments with these names."""

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


def reserved_argument_message(arguments: Mapping[str, Any]) -> str | None:
    """The tool message for arguments ``run_tool`` cannot take (its own parameter names)."""
    for name in RESERVED_ARGUMENT_NAMES:
        if name in arguments:
            return f"Tool argument name {name!r} is reserved."
    return None


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
