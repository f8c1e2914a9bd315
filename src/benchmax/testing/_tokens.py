"""The mock server's token mode: a toy tokenizer, a ChatML chat template, vLLM-shaped replies.

The tokenizer is one token per character (id ``100 + code point``) plus special tokens
(:data:`SPECIAL_TOKENS`, ids below 100), so it is exact both ways and needs no vocabulary
file. The template is ChatML as Qwen uses it::

    <|im_start|>system\\n# Tools\\n<tools JSON><|im_end|>\\n     (only when tools are sent)
    <|im_start|>{role}\\n{text}<|im_end|>\\n                    (every message)
    <|im_start|>assistant\\n                                    (the generation prompt)

An assistant message's text is ``<think>{reasoning}</think>`` (when it carries
``reasoning_content`` or ``reasoning``), its content, then one
``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` per call (arguments as the
message carries them). The model's completion is that text followed by ``<|im_end|>``,
so a conversation that sends the assistant message back unchanged gets a next prompt
that starts with this prompt plus this completion. Template ``"qwen3"`` drops the
reasoning of assistant messages before the last user message, as Qwen3's template
does, which breaks that prefix (a trainer must start a new sample there).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal, cast

from benchmax._message_content import content_text

__all__ = [
    "CHAT_TEMPLATES",
    "SPECIAL_TOKENS",
    "ChatTemplateName",
    "ToyChatTemplate",
    "token_fields",
    "toy_logprob",
]

SPECIAL_TOKENS: Final = {
    "<|endoftext|>": 0,
    "<|im_start|>": 1,
    "<|im_end|>": 2,
    "<think>": 3,
    "</think>": 4,
    "<tool_call>": 5,
    "</tool_call>": 6,
}
"""The toy tokenizer's special tokens and their ids."""

_TEXT_OFFSET: Final = 100
_SPECIAL_TEXT: Final = {number: text for text, number in SPECIAL_TOKENS.items()}
_IM_START, _IM_END = SPECIAL_TOKENS["<|im_start|>"], SPECIAL_TOKENS["<|im_end|>"]
_THINK, _END_THINK = SPECIAL_TOKENS["<think>"], SPECIAL_TOKENS["</think>"]
_CALL, _END_CALL = SPECIAL_TOKENS["<tool_call>"], SPECIAL_TOKENS["</tool_call>"]
_NEWLINE: Final = _TEXT_OFFSET + ord("\n")
_REASONING_FIELDS: Final = ("reasoning_content", "reasoning")

type ChatTemplateName = Literal["chatml", "qwen3"]
CHAT_TEMPLATES: Final = ("chatml", "qwen3")
"""``chatml`` keeps every message's reasoning; ``qwen3`` drops it before the last user turn."""


@dataclass(frozen=True, slots=True)
class ToyChatTemplate:
    """The token mode's tokenizer and chat template (see the module docs)."""

    name: ChatTemplateName = "chatml"

    def __post_init__(self) -> None:
        if self.name not in CHAT_TEMPLATES:
            raise ValueError(f"chat_template must be one of {', '.join(CHAT_TEMPLATES)}")

    @staticmethod
    def encode(text: str) -> list[int]:
        """One id per character: ``100 + ord(character)``."""
        return [_TEXT_OFFSET + ord(character) for character in text]

    @staticmethod
    def token_text(token_id: int) -> str:
        """The text of one token (a special token's name, or its character)."""
        special = _SPECIAL_TEXT.get(token_id)
        return special if special is not None else chr(token_id - _TEXT_OFFSET)

    def decode(self, token_ids: Sequence[int]) -> str:
        """The text of ``token_ids`` (special tokens as their names)."""
        return "".join(self.token_text(token_id) for token_id in token_ids)

    def prompt_ids(self, messages: Sequence[object], tools: object = None) -> list[int]:
        """The templated prompt of a chat request, generation prompt included."""
        ids: list[int] = []
        if isinstance(tools, list) and tools:
            ids.append(_IM_START)
            ids += self.encode("system\n# Tools\n")
            ids += self.encode(json.dumps(tools, ensure_ascii=False, sort_keys=True))
            ids += (_IM_END, _NEWLINE)
        users = (
            i for i, m in enumerate(messages) if isinstance(m, Mapping) and m.get("role") == "user"
        )
        last_user = max(users, default=-1)
        for index, message in enumerate(messages):
            if not isinstance(message, Mapping):
                continue
            role = message.get("role")
            role = role if isinstance(role, str) else "user"
            ids.append(_IM_START)
            ids += self.encode(role + "\n")
            if role == "assistant":
                keep_reasoning = self.name == "chatml" or index > last_user
                ids += self.assistant_ids(message, reasoning=keep_reasoning)
            else:
                ids += self.encode(content_text(message.get("content")))
            ids += (_IM_END, _NEWLINE)
        ids.append(_IM_START)
        ids += self.encode("assistant\n")
        return ids

    def assistant_ids(self, message: Mapping[str, object], *, reasoning: bool = True) -> list[int]:
        """An assistant message's text tokens (without ``<|im_end|>``)."""
        ids: list[int] = []
        if reasoning:
            for field in _REASONING_FIELDS:
                thought = message.get(field)
                if isinstance(thought, str):
                    ids.append(_THINK)
                    ids += self.encode(thought)
                    ids.append(_END_THINK)
                    break
        ids += self.encode(content_text(message.get("content")))
        for call in cast("Iterable[object]", message.get("tool_calls") or ()):
            function = call.get("function") if isinstance(call, Mapping) else None
            if not isinstance(function, Mapping):
                continue
            arguments = function.get("arguments")
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments, ensure_ascii=False)
            name = json.dumps(function.get("name"), ensure_ascii=False)
            ids.append(_CALL)
            ids += self.encode(f'{{"name": {name}, "arguments": {arguments}}}')
            ids.append(_END_CALL)
        return ids

    def completion_ids(self, message: Mapping[str, object]) -> list[int]:
        """What the model "sampled" for ``message``: its text tokens, then ``<|im_end|>``."""
        return [*self.assistant_ids(message), _IM_END]


def toy_logprob(token_id: int, position: int) -> float:
    """A deterministic logprob in (-8, 0] for the token at ``position`` of a completion."""
    mixed = (token_id * 2654435761 + position * 40503) % 1_000_003
    return -mixed / 125_000.37


def token_fields(
    request_body: Mapping[str, object],
    message: Mapping[str, object],
    template: ToyChatTemplate,
) -> tuple[list[int], list[int], dict[str, object] | None, bool]:
    """``(prompt ids, completion ids, choice logprobs or None, ids wanted)`` for one
    reply, honoring the request's ``logprobs``, ``return_token_ids`` and
    ``return_tokens_as_token_ids`` fields as vLLM does."""
    prompt = template.prompt_ids(
        cast("Sequence[object]", request_body.get("messages") or []), request_body.get("tools")
    )
    completion = template.completion_ids(message)
    logprobs: dict[str, object] | None = None
    if request_body.get("logprobs"):
        as_ids = bool(request_body.get("return_tokens_as_token_ids"))
        content = []
        for position, token_id in enumerate(completion):
            text = f"token_id:{token_id}" if as_ids else template.token_text(token_id)
            content.append(
                {
                    "token": text,
                    "logprob": toy_logprob(token_id, position),
                    "bytes": list(text.encode("utf-8", "replace")),
                    "top_logprobs": [],
                }
            )
        logprobs = {"content": content}
    return prompt, completion, logprobs, bool(request_body.get("return_token_ids"))
