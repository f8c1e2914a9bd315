"""What the chat loop sends for the transcript: the messages as recorded, except that an
assistant message whose ``content`` is ``null`` beside ``tool_calls`` is sent with ``""``.

``""`` is what every server takes there: vLLM takes both (and sends ``""`` itself),
SGLang's request types take a string (older releases a string only), OpenAI's reference
allows a string beside ``tool_calls``, while ``llama-cpp-python``'s server types the field
as a string (an HTTP 500 for ``null``) and chat templates that concatenate
``message['content']`` (SmolLM2's, among others) fail to render ``null``. The recorded
transcript keeps ``null`` (``envs.md`` §4.4 step 4); only the request body carries ``""``
(a change to the wire form of §4.3, which sends ``None`` contents as ``null``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["messages_as_sent"]


def messages_as_sent(messages: Sequence[Mapping[str, Any]]) -> Sequence[Mapping[str, Any]]:
    """``messages`` itself when no message needs changing, else a new list in which each
    assistant message with ``content`` ``None`` and non-empty ``tool_calls`` is a copy
    with ``content`` ``""`` (key order kept); the messages themselves are never changed."""
    sent: list[Mapping[str, Any]] | None = None
    for index, message in enumerate(messages):
        if (
            message.get("role") == "assistant"
            and "content" in message
            and message["content"] is None
            and message.get("tool_calls")
        ):
            if sent is None:
                sent = list(messages)
            sent[index] = {**message, "content": ""}
    return messages if sent is None else sent
