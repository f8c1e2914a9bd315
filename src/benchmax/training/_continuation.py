"""Token-in/token-out turns: a rollout's next prompt continues its previous call's ids.

A chat template may render earlier turns differently from how the model sampled them
(Qwen3 drops the ``<think>`` blocks of earlier turns, tool-call JSON is re-serialised), so
re-rendering a whole conversation for each call can change ids the model already produced:
a token-prefix break, after which the earlier calls cannot train with the later ones.
:class:`RolloutTurns` remembers, per rollout, the last call's messages, its exact prompt
and completion ids and the assistant message replied. A call of the same rollout whose
``messages`` are the previous call's messages, then that reply (same text and tool calls),
then new messages (tool results, a user turn) gets as its prompt the previous prompt +
completion ids followed by the rendering of only the new messages.

That rendering: the template renders a fixed opening (a user message, then an assistant
message holding a marker) followed by the new messages, with the request's ``tools``,
``chat_template_kwargs`` and generation prompt; the text after the marker is what closes an
assistant turn, the new messages and the generation prompt. When the previous completion
ended on a token (EOS or a stop token) whose text opens that closing (``<|im_end|>``), the
closing's copy is left out: the model already wrote it. Anything else (other messages
before, an edited reply, other tools or template arguments, a template that loses the
marker or refuses the opening) renders the whole conversation, as for a call of an
unknown rollout.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from benchmax.training._chat_format import RequestError, render_text

__all__ = ["RolloutTurns"]

_MARKER = "benchmax-turn-marker-5c1e9a"
_OPENING: tuple[dict[str, object], ...] = (
    {"role": "user", "content": "benchmax"},
    {"role": "assistant", "content": _MARKER},
)
_CONTEXT_FIELDS = ("tools", "chat_template_kwargs", "add_generation_prompt")


@dataclass(frozen=True, slots=True)
class _Turn:
    """What one call of a rollout sent and got."""

    messages: tuple[bytes, ...]  # each message as canonical JSON
    context: bytes  # the fields besides messages that change the rendering
    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    ended_by_token: bool
    reply: tuple[str, tuple[tuple[str, bytes], ...]]  # text and (name, arguments) calls


class RolloutTurns:
    """The last turn of up to ``capacity`` rollouts (least recently used forgotten), and
    the prompt ids that continue them (module docs). Not thread-safe: one thread (the
    sampler's HTTP loop) uses it, holding the tokenizer's lock around :meth:`prompt_ids`.
    ``continued`` and ``rendered`` count the calls of known rollouts that did and did not
    continue their previous call."""

    def __init__(self, tokenizer: Any, *, capacity: int = 1024) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self._tokenizer = tokenizer
        self._capacity = capacity
        self._turns: collections.OrderedDict[str, _Turn] = collections.OrderedDict()
        self.continued = 0
        self.rendered = 0

    def prompt_ids(self, rollout_id: str, body: object) -> tuple[int, ...] | None:
        """The prompt continuing ``rollout_id``'s last call for this request ``body``, or
        ``None``: render the whole conversation (no call before, or one it does not
        continue; a malformed body is left to the request's own validation)."""
        previous = self._turns.get(rollout_id)
        if previous is None or not isinstance(body, Mapping):
            return None
        messages = body.get("messages")
        if not isinstance(messages, list):
            return None
        found = self._continuation(previous, messages, body)
        if found is None:
            self.rendered += 1
        else:
            self.continued += 1
        return found

    def record(
        self,
        rollout_id: str,
        body: Mapping[str, object],
        prompt_ids: Sequence[int],
        completion_ids: Sequence[int],
        *,
        ended_by_token: bool,
        reply: Mapping[str, object],
    ) -> None:
        """Remember a call of ``rollout_id``: its request, its ids and the assistant
        ``reply`` message sent back."""
        messages = body.get("messages")
        if not isinstance(messages, list):
            return
        try:
            turn = _Turn(
                messages=tuple(_canonical(message) for message in messages),
                context=_canonical([body.get(name) for name in _CONTEXT_FIELDS]),
                prompt_ids=tuple(prompt_ids),
                completion_ids=tuple(completion_ids),
                ended_by_token=ended_by_token,
                reply=_assistant_key(reply),
            )
        except (TypeError, ValueError):
            return
        self._turns[rollout_id] = turn
        self._turns.move_to_end(rollout_id)
        while len(self._turns) > self._capacity:
            self._turns.popitem(last=False)

    def __len__(self) -> int:
        return len(self._turns)

    def _continuation(
        self, previous: _Turn, messages: list[object], body: Mapping[str, object]
    ) -> tuple[int, ...] | None:
        known = len(previous.messages)
        try:
            if _canonical([body.get(name) for name in _CONTEXT_FIELDS]) != previous.context:
                return None
            sent = tuple(_canonical(message) for message in messages[:known])
        except (TypeError, ValueError):
            return None
        if sent != previous.messages:
            return None
        if len(messages) == known:  # the same request again (a retry)
            return previous.prompt_ids
        reply = messages[known]
        if not isinstance(reply, Mapping) or reply.get("role") != "assistant":
            return None
        try:
            if _assistant_key(reply) != previous.reply:
                return None
        except (TypeError, ValueError):
            return None
        added = self._new_turn_ids(previous, messages[known + 1 :], body)
        if added is None:
            return None
        return previous.prompt_ids + previous.completion_ids + added

    def _new_turn_ids(
        self, previous: _Turn, new: Sequence[object], body: Mapping[str, object]
    ) -> tuple[int, ...] | None:
        generation = body.get("add_generation_prompt", True)
        try:
            text = render_text(
                self._tokenizer, [*_OPENING, *new], body, generation=bool(generation)
            )
        except RequestError:
            return None
        if text.count(_MARKER) != 1:
            return None
        tail = text[text.index(_MARKER) + len(_MARKER) :]
        if previous.ended_by_token and previous.completion_ids:
            written = str(self._tokenizer.decode([previous.completion_ids[-1]]))
            if written and tail.startswith(written):
                tail = tail[len(written) :]
        return tuple(self._tokenizer.encode(tail, add_special_tokens=False))


def _canonical(value: object) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def _assistant_key(message: Mapping[str, object]) -> tuple[str, tuple[tuple[str, bytes], ...]]:
    """An assistant message's text and tool calls (name, arguments as canonical JSON),
    which a client may re-serialise without changing them (ids, key order, spacing)."""
    content = message.get("content")
    if isinstance(content, list):
        text = "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    else:
        text = content if isinstance(content, str) else ""
    calls: list[tuple[str, bytes]] = []
    raw_calls = message.get("tool_calls")
    for call in raw_calls if isinstance(raw_calls, list) else []:
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping):
            raise ValueError("a tool call without a function")
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            arguments = orjson.loads(arguments)
        calls.append((str(function.get("name")), _canonical(arguments)))
    return text, tuple(calls)
