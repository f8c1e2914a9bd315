"""A whole transcript as bounded text for a judge: tool calls with their arguments and
results, simulated-user turns, the final reply.

Rendering (:func:`render_transcript`), one block per message, blocks separated by a blank
line::

    [system]
    You are a support agent.

    [user]
    My order has not arrived.

    [assistant]
    Let me look it up.
    -> tool call lookup_order {"order_id": "A17"}

    [tool result lookup_order]
    {"status": "lost"}

    [user (simulated)]
    Can I get a refund?

    [assistant]
    Yes: a refund for A17 is on its way.

Reasoning is left out (``reasoning_content``/``reasoning`` fields and ``<think>`` blocks),
as for final replies. Bounds (:class:`TranscriptLimits`): a tool call's arguments, a tool
result and a message are each cut to their limit, the cut marked ``…[N more characters]``;
when the blocks together exceed ``max_chars``, the first block (the task) and as many of
the last blocks as fit are kept and one line ``[… K messages omitted …]`` stands for the
others. The last block (the final reply) is always kept, so the text never exceeds
``max_chars``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, cast

from benchmax._value_checks import is_int_at_least
from benchmax.rewards.text import message_text, without_reasoning
from benchmax.trajectory import is_simulated_user

__all__ = ["TranscriptLimits", "render_transcript"]

_OMISSION_ROOM: Final = 120
"""Characters kept free for the omission line and block separators."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TranscriptLimits:
    """Size caps (characters) of a rendered transcript.

    ``max_chars`` bounds the whole text; ``max_message_chars`` one message's block (its
    text and tool calls); ``max_argument_chars`` one tool call's arguments;
    ``max_tool_result_chars`` one tool result. Raises ``ValueError`` unless every cap is a
    positive integer and ``max_chars`` leaves room for one full message block
    (``max_chars >= max_message_chars + 120``).
    """

    max_chars: int = 24_000
    max_message_chars: int = 4_000
    max_argument_chars: int = 1_000
    max_tool_result_chars: int = 2_000

    def __post_init__(self) -> None:
        for name in ("max_chars", "max_message_chars", "max_argument_chars"):
            if not is_int_at_least(getattr(self, name), 1):
                raise ValueError(f"transcript limit {name} must be a positive integer")
        if not is_int_at_least(self.max_tool_result_chars, 1):
            raise ValueError("transcript limit max_tool_result_chars must be a positive integer")
        if self.max_chars < self.max_message_chars + _OMISSION_ROOM:
            raise ValueError(
                f"transcript limit max_chars must be at least max_message_chars + {_OMISSION_ROOM}"
            )


def _cut(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, the cut marked with what was dropped."""
    if len(text) <= limit:
        return text
    dropped = len(text) - limit
    while True:  # the marker's length depends on the count it names; this settles
        marker = f" …[{dropped} more characters]"
        kept = limit - len(marker)
        if kept < 0:  # no room even for the marker
            return text[:limit]
        if len(text) - kept == dropped:
            return text[:kept] + marker
        dropped = len(text) - kept


def _arguments_text(arguments: object) -> str:
    """Tool-call arguments as compact JSON (as sent, when they are not JSON)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return str(arguments)
    try:
        return json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return str(arguments)


def _block(message: object, names: dict[str, str], limits: TranscriptLimits) -> str:
    """One message's block: a ``[role]`` header, its text, its tool calls."""
    if not isinstance(message, Mapping):
        return _cut(f"[message]\n{message}", limits.max_message_chars)
    role = str(message.get("role", "?"))
    text = without_reasoning(message_text(message.get("content"))).strip()
    if role == "tool":
        name = names.get(str(message.get("tool_call_id")), "")
        header = f"[tool result {name}]" if name else "[tool result]"
        body = _cut(text, limits.max_tool_result_chars)
    else:
        header = "[user (simulated)]" if is_simulated_user(message) else f"[{role}]"
        lines = [text] if text else []
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, Mapping) else None
            function = function if isinstance(function, Mapping) else {}
            name = str(function.get("name", "?"))
            if isinstance(call, Mapping) and call.get("id") is not None:
                names[str(call["id"])] = name
            arguments = _cut(_arguments_text(function.get("arguments")), limits.max_argument_chars)
            lines.append(f"-> tool call {name} {arguments}")
        body = "\n".join(lines)
    return _cut(f"{header}\n{body}" if body else header, limits.max_message_chars)


def render_transcript(
    messages: Sequence[Mapping[str, object]], *, limits: TranscriptLimits | None = None
) -> str:
    """``messages`` (a chat transcript) as text a judge reads, at most ``limits.max_chars``
    characters (default :class:`TranscriptLimits`); the format is the module's docstring.

    Raises ``TypeError`` when ``messages`` is a string rather than a list of messages.
    """
    if isinstance(cast(object, messages), str):
        raise TypeError("render_transcript needs a list of messages, not a string")
    limits = TranscriptLimits() if limits is None else limits
    names: dict[str, str] = {}
    blocks = [_block(message, names, limits) for message in messages]
    separator = "\n\n"
    total = sum(len(block) for block in blocks) + len(separator) * max(0, len(blocks) - 1)
    if total <= limits.max_chars:
        return separator.join(blocks)
    budget = limits.max_chars - _OMISSION_ROOM
    tail: list[str] = []
    used = 0
    for block in reversed(blocks[1:]):
        if tail and used + len(block) + len(separator) > budget:
            break
        tail.append(block)
        used += len(block) + len(separator)
    tail.reverse()
    head = [blocks[0]] if used + len(blocks[0]) + len(separator) <= budget else []
    omitted = len(blocks) - len(head) - len(tail)
    plural = "s" if omitted != 1 else ""
    line = f"[… {omitted} message{plural} omitted to fit {limits.max_chars} characters …]"
    return separator.join([*head, line, *tail])
