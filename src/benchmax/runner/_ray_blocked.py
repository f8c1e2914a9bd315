"""Noticing a Ray worker whose event loop a hook blocks, and settling the group that did it.

A worker keeps a ``LoopHeartbeat`` on the loop its groups run on; its ``state()`` is read from
another thread (the worker's watch concurrency group), so it answers while the loop is blocked:
how long the loop has not run, which group's task holds it (each group runs in the context
``group_context`` makes) and which function. The driver asks once a group is past
``check_after`` seconds; ``settled_group`` is what it writes for the group that blocked.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from benchmax._vocabulary import ROLLOUT_TIMEOUT
from benchmax.envs.environment import Environment
from benchmax.results import TrajectoryGroup
from benchmax.runner._config import mask_secrets
from benchmax.runner._loop_watch import blocking_hook
from benchmax.runner._run import GroupJob
from benchmax.trajectory import LogEntry, Trajectory

__all__ = [
    "BEAT_SECONDS",
    "LoopHeartbeat",
    "LoopState",
    "check_after",
    "group_context",
    "settled_group",
]

BEAT_SECONDS = 0.25
"""How often the heartbeat runs on a healthy loop."""

_GROUP: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "benchmax_ray_group", default=None
)


@dataclass(frozen=True, slots=True)
class LoopState:
    """A worker's event loop as another thread sees it.

    ``blocked_seconds``: since the loop last ran its heartbeat; ``example_index``: the
    group whose task holds the loop now (``None``: none, or no task); ``hook``: the code
    it runs (``qualname (file:line)``, outside benchmax and installed packages).
    """

    blocked_seconds: float
    example_index: int | None
    hook: str | None


class LoopHeartbeat:
    """A heartbeat on the loop ``start`` is called on, read from any thread by ``state``."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = 0
        self._beat = time.monotonic()

    def start(self) -> None:
        """Begin beating on the running loop (call it on that loop)."""
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._tick()

    def _tick(self) -> None:
        self._beat = time.monotonic()
        assert self._loop is not None
        self._loop.call_later(BEAT_SECONDS, self._tick)

    def state(self) -> LoopState:
        """How the loop is doing now."""
        blocked = time.monotonic() - self._beat
        task = None if self._loop is None else asyncio.current_task(self._loop)
        index = None if task is None else task.get_context().get(_GROUP)
        return LoopState(blocked, index, blocking_hook(self._thread))


def group_context(example_index: int) -> contextvars.Context:
    """A copy of the current context naming the group of ``example_index``: run the
    group's task in it (every task it starts inherits it)."""
    context = contextvars.copy_context()
    context.run(_GROUP.set, example_index)
    return context


def _seconds(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        return None
    return float(value)


def check_after(env_attributes: Mapping[str, Any], env: Environment[Any, Any]) -> float | None:
    """Seconds after sending a group from which its worker's loop is checked (``None``:
    never): the rollout timeout (``env_attributes`` first, then the environment's
    attribute), plus the reward timeout when there is one."""

    def limit(name: str) -> float | None:
        return _seconds(env_attributes.get(name, getattr(env, name, None)))

    rollout = limit("rollout_timeout")
    if rollout is None:
        return None
    return rollout + (limit("reward_timeout") or 0.0)


def settled_group(
    job: GroupJob,
    state: LoopState,
    *,
    deadline: float,
    seconds: float,
    reward_keys: Sequence[str],
    split: str,
    secrets: Sequence[str],
) -> TrajectoryGroup:
    """``job``'s group after its code blocked its worker's loop past ``deadline``: every
    rollout ``rollout_timeout`` with zero rewards and one log entry saying why."""
    hook = state.hook or "code that could not be located"
    message = mask_secrets(
        f"rollout_timeout: the Ray worker's event loop was blocked for "
        f"{state.blocked_seconds:.1f} s by {hook} after the rollout deadline ({deadline:g} s), "
        "so the timeout could not act (a synchronous sleep or loop inside async def; await, "
        "or use asyncio.to_thread); the worker was replaced and the group's rollouts settled "
        "with zero rewards",
        secrets,
    )
    entry = LogEntry(
        time=datetime.now(UTC).isoformat(timespec="milliseconds"),
        level="ERROR",
        logger="benchmax.runner",
        message=message,
    )
    trajectories = tuple(
        Trajectory(
            rollout_id=rollout_id,
            example_id=job.example.id,
            termination_reason=ROLLOUT_TIMEOUT,
            rewards=dict.fromkeys(reward_keys, 0.0),
            timings={"group_seconds": round(seconds, 6)},
            logs=(entry,),
            attempt=job.attempt,
            run_id=job.run_id,
            split=split,
            example_index=job.example_index,
            group_index=k,
        )
        for k, rollout_id in enumerate(job.rollout_ids)
    )
    return TrajectoryGroup(trajectories)
