"""Measuring a ``BaseEnv`` rollout that a runner observes: ``Meter`` (which also reports
the finished rollout), and the timed model call."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from benchmax._modelhttp import CallTokens, Reply, ReplyFailure, TokenDeficiency
from benchmax._observer import report_rollout
from benchmax._vocabulary import TokenUsage
from benchmax.envs.shared_types import RolloutAttempt, RolloutRequest
from benchmax.trajectory import ModelCall, ToolCallTiming, Trajectory

if TYPE_CHECKING:  # imported on first use: aiohttp costs a quarter second to import
    from benchmax._modelhttp import ChatSession

__all__ = ["Meter", "call_model", "timed"]


class Meter:
    """What a runner is told about a rollout: time spent waiting on the model, in tools
    and in ``compute_reward``, the token usage the model's replies reported, one
    ``ModelCall`` per model call and one ``ToolCallTiming`` per tool message."""

    __slots__ = ("calls", "model", "reward", "tool", "tool_calls", "tools_pending", "usage")

    def __init__(self) -> None:
        self.model = 0.0
        self.tool = 0.0
        self.reward = 0.0
        self.usage: dict[str, int] | None = None
        self.calls: list[ModelCall] = []
        self.tool_calls: list[ToolCallTiming] = []
        self.tools_pending: list[tuple[str, float]] = []

    def describe_call(
        self,
        reply: Reply | ReplyFailure,
        message_index: int | None,
        tokens: CallTokens | TokenDeficiency | None = None,
        weights_version: int | None = None,
    ) -> None:
        """Fill in the last model call from its reply (``message_index``: where its
        assistant message went in the transcript, ``None`` when it added none), when
        recorded its exact tokens, and the ``weights_version`` the reply reported."""
        finish_reason = reply.finish_reason if isinstance(reply, Reply) else None
        fields: dict[str, Any] = {
            "finish_reason": finish_reason if isinstance(finish_reason, str) else None,
            "usage": reply.usage,
            "message_index": message_index,
            "weights_version": weights_version,
        }
        if isinstance(tokens, CallTokens):
            fields["prompt_token_ids"] = tokens.prompt_token_ids
            fields["completion_token_ids"] = tokens.completion_token_ids
            fields["completion_logprobs"] = tokens.completion_logprobs
        call = self.calls[-1] = replace(self.calls[-1], **fields)
        if call.has_tokens:
            # Settle once, while the ids are fresh, whether this call continues the last
            # one with tokens: the call keeps the answer, so writing the record and
            # building training samples later take time linear in this turn only.
            previous = next((c for c in reversed(self.calls[:-1]) if c.has_tokens), None)
            if previous is not None:
                call.continues(previous)

    def tools_answered(self, first_index: int) -> None:
        """The pending tool calls' messages went into the transcript from ``first_index``."""
        self.tool_calls.extend(
            ToolCallTiming(name=name, seconds=round(seconds, 6), message_index=first_index + offset)
            for offset, (name, seconds) in enumerate(self.tools_pending)
        )
        self.tools_pending.clear()

    def report(
        self,
        request: RolloutRequest[Any],
        rollout: RolloutAttempt,
        messages: Sequence[Mapping[str, Any]],
        annotations: Mapping[str, Any],
    ) -> None:
        """Tell the runner that ``rollout`` of ``request`` finished: its outcome, its
        transcript ``messages``, its ``annotate`` calls and what this meter measured
        (``model_seconds``, ``tool_seconds``, ``reward_seconds``, rounded to 1 µs)."""
        report_rollout(
            Trajectory(
                rollout_id=rollout.rollout_id,
                example_id=request.example.id,
                termination_reason=rollout.termination_reason,
                rewards=rollout.rewards or {},
                split=request.split,
                messages=tuple(messages),
                model_calls=tuple(self.calls),
                tool_calls=tuple(self.tool_calls),
                timings={
                    "model_seconds": round(self.model, 6),
                    "tool_seconds": round(self.tool, 6),
                    "reward_seconds": round(self.reward, 6),
                },
                usage=cast(TokenUsage | None, self.usage),
                annotations=annotations,
            )
        )

    @contextmanager
    def timing(self, part: str) -> Iterator[None]:
        """Add the time spent in the ``with`` block to ``part``."""
        started = time.perf_counter()
        try:
            yield
        finally:
            setattr(self, part, getattr(self, part) + time.perf_counter() - started)


def timed(meter: Meter | None, part: str) -> AbstractContextManager[None]:
    """Time ``part`` when a runner observes rollouts; nothing otherwise."""
    return nullcontext() if meter is None else meter.timing(part)


async def call_model(session: ChatSession, body: dict[str, Any], meter: Meter | None) -> object:
    """``session.complete(body)``; when observed, its time joins ``model_seconds`` and a
    ``ModelCall`` is started for it (also when the call is cancelled)."""
    if meter is None:
        return await session.complete(body)
    started = time.perf_counter()
    try:
        return await session.complete(body)
    finally:
        seconds = time.perf_counter() - started
        meter.model += seconds
        meter.calls.append(ModelCall(seconds=round(seconds, 6)))
