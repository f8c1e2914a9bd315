"""A side channel through which BaseEnv reports finished rollouts to a runner.

With no observer bound (the default) nothing is recorded and 0.2 behavior is
unchanged. The local runner binds one for the duration of a run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol, cast

from benchmax import _context
from benchmax._vocabulary import TokenUsage
from benchmax.trajectory import LogEntry, ModelCall, RolloutTimings, ToolCallTiming, Trajectory

__all__ = ["RolloutObserver", "RolloutReport", "observe_rollouts", "observing", "report_rollout"]


@dataclass(frozen=True, slots=True)
class RolloutReport:
    """What a finished BaseEnv rollout tells the observer beyond its outcome."""

    rollout_id: str
    termination_reason: str
    messages: Sequence[Any]
    model_seconds: float
    tool_seconds: float
    reward_seconds: float
    usage: Mapping[str, int] | None = None
    """Token usage summed over the rollout's model calls (``None``: none reported)."""
    model_calls: tuple[ModelCall, ...] = ()
    """One entry per model call, in order."""
    tool_calls: tuple[ToolCallTiming, ...] = ()
    """One entry per tool message, in order."""
    annotations: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    """What the rollout attached with ``benchmax.trajectory.annotate``."""

    def to_trajectory(
        self,
        *,
        example_id: str,
        termination_reason: str,
        rewards: Mapping[str, float],
        group_seconds: float | None = None,
        logs: Sequence[LogEntry] = (),
        attempt: int = 1,
        run_id: str | None = None,
        split: str = "train",
        example_index: int | None = None,
        group_index: int = 0,
    ) -> Trajectory:
        """The rollout's record, with the final outcome (group rewards merged) and where
        it belongs; timings are rounded to microseconds."""
        timings: RolloutTimings = {}
        if group_seconds is not None:
            timings["group_seconds"] = round(group_seconds, 6)
        timings["model_seconds"] = round(self.model_seconds, 6)
        timings["tool_seconds"] = round(self.tool_seconds, 6)
        timings["reward_seconds"] = round(self.reward_seconds, 6)
        return Trajectory(
            rollout_id=self.rollout_id,
            example_id=example_id,
            termination_reason=termination_reason,
            rewards=rewards,
            attempt=attempt,
            run_id=run_id,
            split=split,
            example_index=example_index,
            group_index=group_index,
            messages=tuple(self.messages),
            model_calls=self.model_calls,
            tool_calls=self.tool_calls,
            timings=cast(Mapping[str, float], timings),
            usage=cast(TokenUsage, dict(self.usage)) if self.usage else None,
            logs=tuple(logs),
            annotations=self.annotations,
        )


class RolloutObserver(Protocol):
    def rollout_finished(self, report: RolloutReport) -> None: ...


_ROLLOUT_OBSERVER: ContextVar[RolloutObserver | None] = _context.ROLLOUT_OBSERVER


@contextlib.contextmanager
def observe_rollouts(observer: RolloutObserver) -> Iterator[None]:
    """Send reports of rollouts finished inside the block (and tasks it starts)."""
    token = _ROLLOUT_OBSERVER.set(observer)
    try:
        yield
    finally:
        _ROLLOUT_OBSERVER.reset(token)


def observing() -> bool:
    """Whether an observer is bound (lets callers skip timing work when not)."""
    return _ROLLOUT_OBSERVER.get() is not None


def report_rollout(report: RolloutReport) -> None:
    """Hand ``report`` to the bound observer, if any."""
    observer = _ROLLOUT_OBSERVER.get()
    if observer is not None:
        observer.rollout_finished(report)
