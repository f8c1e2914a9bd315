"""The rule for reading the text of a chat message's ``content`` (beyond.md §7).

It sits below every layer so that reply normalization (``benchmax._modelhttp``) and
the reward helpers (``benchmax.rewards.text.message_text``, the public reader) apply
one rule: a string is its text; a list of parts is the concatenation of its text
parts (mappings whose ``"type"`` is ``"text"`` or absent with a string ``"text"``,
and plain string items); anything else has none.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["content_text"]


def content_text(content: object) -> str:
    """The text of ``content`` (see the module docstring), unstripped."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list | tuple):
        return ""
    texts: list[str] = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif (
            isinstance(part, Mapping)
            and part.get("type", "text") == "text"
            and isinstance(part.get("text"), str)
        ):
            texts.append(part["text"])
    return "".join(texts)
