"""Reading text the way models write it: content parts and reasoning.

Every reader of message text in :mod:`benchmax.rewards` goes through
:func:`message_text` (a ``content`` may be a string, ``None`` or a list of
parts), and everything that looks for an answer or a verdict goes through
:func:`without_reasoning` (text inside ``<think>…</think>``, and everything
before a lone ``</think>``, is the model's reasoning, never its answer).
"""

from __future__ import annotations

from benchmax._message_content import content_text, split_reasoning

__all__ = ["message_text", "reasoning_finished", "without_reasoning"]


def message_text(content: object) -> str:
    """The text of a chat message ``content``, unstripped.

    A string is returned as is; ``None`` (and any other non-text value) gives
    ``""``; a list of parts gives the concatenation, in order and without
    separators, of its text parts: mappings whose ``"type"`` is ``"text"`` (or
    absent) and whose ``"text"`` is a string, and plain string items. Other
    parts (images, audio, refusals, provider reasoning parts) are not text.
    """
    return content_text(content)


def without_reasoning(text: str) -> str:
    """``text`` with its reasoning removed, unstripped.

    Reasoning is every ``<think>…</think>`` block (tags are matched in any case
    and may carry attributes, ``<Think mode="x">``; a nested ``<think>`` stays
    inside the block) and everything before a lone
    ``</think>`` (chat templates that open the block themselves). A block that
    is never closed runs to the end of the text, so a reply cut off while
    reasoning has no answer: ``"<think>draft"`` gives ``""``.
    """
    return split_reasoning(text)[0]


def reasoning_finished(text: str) -> bool:
    """Whether every ``<think>`` block in ``text`` is closed (see :func:`without_reasoning`)."""
    return split_reasoning(text)[1]
