"""A side channel through which BaseEnv reports finished rollouts to a runner.

With no observer bound (the default) nothing is recorded and 0.2 behavior is
unchanged. The local runner binds one for the duration of a run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

from benchmax import _context

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
    call_tokens: Sequence[Any] = ()
    """Per model call, its exact tokens (``CallTokens``) when the rollout recorded them."""


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
