"""A side channel through which BaseEnv reports finished rollouts to a runner.

With no observer bound (the default) nothing is recorded and 0.2 behavior is
unchanged. The local runner binds one for the duration of a run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Protocol

from benchmax.trajectory import Trajectory

__all__ = ["RolloutObserver", "RolloutReport", "observe_rollouts", "observing", "report_rollout"]


RolloutReport = Trajectory
"""What a finished BaseEnv rollout reports: its record, with the rollout's own outcome
(before group rewards are merged) and no place in a run yet (``run_id``,
``example_index``, ``group_index``, ``attempt`` and ``logs`` are the runner's to fill
with ``dataclasses.replace``)."""


class RolloutObserver(Protocol):
    def rollout_finished(self, report: Trajectory) -> None: ...


_ROLLOUT_OBSERVER: ContextVar[RolloutObserver | None] = ContextVar(
    "benchmax_rollout_observer", default=None
)


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


def report_rollout(report: Trajectory) -> None:
    """Hand ``report`` to the bound observer, if any."""
    observer = _ROLLOUT_OBSERVER.get()
    if observer is not None:
        observer.rollout_finished(report)
