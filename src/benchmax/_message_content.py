"""The rule for reading the text of a chat message's ``content`` (beyond.md §7).

It sits below every layer so that reply normalization (``benchmax._modelhttp``) and
the reward helpers (``benchmax.rewards.text.message_text``, the public reader) apply
one rule: a string is its text; a list of parts is the concatenation of its text
parts (mappings whose ``"type"`` is ``"text"`` or absent with a string ``"text"``,
and plain string items); anything else has none. Reasoning written inline in that text
(``<think>…</think>``) is split off by one rule too, :func:`split_reasoning`, used by the
reward helpers (``benchmax.rewards.text.without_reasoning``) and the simulated user.

The parts benchmax itself builds (tool results, traces read from other formats) are
typed here too: :class:`TextPart` and :class:`ImagePart`, together :data:`ContentPart`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal, TypedDict

__all__ = ["ContentPart", "ImagePart", "ImageURL", "TextPart", "content_text", "split_reasoning"]


class TextPart(TypedDict):
    """``{"type": "text", "text": ...}``: a text part of a message's content."""

    type: Literal["text"]
    text: str


class ImageURL(TypedDict):
    """The ``image_url`` of an :class:`ImagePart`: an ``http(s):`` or ``data:`` URL."""

    url: str


class ImagePart(TypedDict):
    """``{"type": "image_url", "image_url": {"url": ...}}``: an image part."""

    type: Literal["image_url"]
    image_url: ImageURL


type ContentPart = TextPart | ImagePart

# ``<think>``/``</think>`` in any case, with attributes or spaces (``<think type="x">``,
# ``</Think >``); ``<thinking>`` is another tag.
_THINK_TAG = re.compile(r"<(/?)think(?:\s[^<>]*)?>", re.IGNORECASE)


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


def split_reasoning(text: str) -> tuple[str, bool]:
    """``(text outside reasoning, whether the last reasoning block was closed)``.

    Reasoning is every ``<think>…</think>`` block (tags in any case, with attributes; a
    nested ``<think>`` stays inside the block) and everything before a lone ``</think>``;
    a block never closed runs to the end of the text.
    """
    kept: list[str] = []
    position = 0
    inside = False
    for tag in _THINK_TAG.finditer(text):
        closing = tag.group(1) == "/"
        if inside:
            if closing:
                inside = False
                position = tag.end()
            continue
        if closing:
            kept.clear()
        else:
            kept.append(text[position : tag.start()])
            inside = True
        position = tag.end()
    if inside:
        return "".join(kept), False
    kept.append(text[position:])
    return "".join(kept), True
