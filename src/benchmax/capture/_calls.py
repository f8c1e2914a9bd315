"""One captured model call: what the program sent, what the upstream answered, and the
exact tokens and weights version that answer was sampled with."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from benchmax._modelhttp import CallTokens, reply_usage
from benchmax.trajectory import ModelCall

__all__ = ["CapturedCall"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CapturedCall:
    """One chat-completions call a program made through a capture session.

    ``request`` is the body the program sent (as it sent it: its own model name, messages,
    tools, sampling fields); ``reply`` the upstream's decoded JSON reply (token fields
    included, before they were stripped from what the program got; the id lists
    ``tokens`` was read from are its tuples, the same ids held once); ``tokens`` the prompt
    ids, completion ids and logprobs read from it; ``weights_version`` the version of the
    weights that sampled it when the upstream says (``benchmax train``'s sampler does),
    else ``None``; ``seconds`` the time the upstream took; ``streamed`` whether the program
    asked for an event stream. Immutable once recorded.
    """

    request: Mapping[str, Any]
    reply: Mapping[str, Any]
    tokens: CallTokens
    weights_version: int | None
    seconds: float
    streamed: bool

    @property
    def message(self) -> Mapping[str, Any]:
        """The assistant message of the reply's first choice (``{}`` when it has none)."""
        choices = self.reply.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
            message = choices[0].get("message")
            if isinstance(message, Mapping):
                return message
        return {}

    @property
    def finish_reason(self) -> str | None:
        choices = self.reply.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
            reason = choices[0].get("finish_reason")
            return reason if isinstance(reason, str) else None
        return None

    def model_call(self, message_index: int | None = None) -> ModelCall:
        """This call as the rollout record's :class:`~benchmax.trajectory.ModelCall`."""
        return ModelCall(
            finish_reason=self.finish_reason,
            usage=reply_usage(self.reply),  # type: ignore[arg-type]  # checked by ModelCall
            seconds=round(self.seconds, 6),
            message_index=message_index,
            prompt_token_ids=self.tokens.prompt_token_ids,
            completion_token_ids=self.tokens.completion_token_ids,
            completion_logprobs=self.tokens.completion_logprobs,
            weights_version=self.weights_version,
        )
