"""OpenAI Responses API items (NeMo-Gym's wire format) to and from chat messages."""

from __future__ import annotations

import json
from collections.abc import Sequence

__all__ = ["final_assistant_message", "responses_input", "responses_tools"]


def responses_input(messages: Sequence[dict[str, object]]) -> list[dict[str, object]]:
    """Chat prompt messages as Responses ``input`` items (``EasyInputMessage``s)."""
    items: list[dict[str, object]] = []
    for message in messages:
        role = message.get("role")
        if role in ("system", "user", "assistant", "developer"):
            content = message.get("content")
            items.append(
                {
                    "role": role,
                    "content": content if isinstance(content, str) else _text(content),
                    "type": "message",
                }
            )
    return items


def responses_tools(tools: Sequence[object]) -> list[dict[str, object]]:
    """OpenAI chat function tools as Responses function tools."""
    shaped = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            shaped.append(
                {
                    "type": "function",
                    "name": function["name"],
                    "description": function.get("description") or "",
                    "parameters": function.get("parameters") or {"type": "object"},
                    "strict": False,
                }
            )
    return shaped


def final_assistant_message(output: Sequence[object]) -> dict[str, object] | None:
    """The agent's last turn as a chat assistant message: the ``message`` text and
    ``function_call`` items after the last ``function_call_output`` (earlier calls ran
    through the tool routes); ``None`` when there is neither."""
    tail: list[object] = []
    for item in reversed(output):
        if isinstance(item, dict) and item.get("type") == "function_call_output":
            break
        tail.insert(0, item)
    texts: list[str] = []
    calls: list[dict[str, object]] = []
    for item in tail:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "message" and item.get("role", "assistant") == "assistant":
            texts.append(_text(item.get("content")))
        elif item.get("type") == "function_call":
            arguments = item.get("arguments")
            calls.append(
                {
                    "id": str(item.get("call_id") or f"call_{len(calls)}"),
                    "type": "function",
                    "function": {
                        "name": str(item.get("name") or ""),
                        "arguments": arguments
                        if isinstance(arguments, str)
                        else json.dumps(arguments),
                    },
                }
            )
    if not texts and not calls:
        return None
    message: dict[str, object] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    return message


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict):
                text = part.get("text", part.get("refusal"))
                if isinstance(text, str):
                    parts.append(text)
        return "".join(parts)
    return ""
