"""The body of a Ray worker actor (``_GroupWorker``): it loads the bundle once, constructs
the environment and runs many groups at once on its own event loop with the local
runner's ``GroupCollector``, replying with the lines a local run writes."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import re
from dataclasses import dataclass
from typing import Any

import cloudpickle

from benchmax._rollout_limits import LIMIT_NAMES, apply_limits
from benchmax._secret_masking import mask_standard_streams, remember
from benchmax.bundle import Bundle, load_bundle, validate_bundle_compatibility
from benchmax.envs.environment import Environment
from benchmax.results import TrajectoryGroup
from benchmax.runner._config import RunConfig, mask_secrets
from benchmax.runner._ray_blocked import LoopHeartbeat, LoopState, group_context
from benchmax.runner._run import GroupCollector, GroupJob
from benchmax.trajectory import LogEntry, Trajectory

# ``_GroupWorker`` keeps its name: Ray titles a worker's process ``ray::_GroupWorker``.
__all__ = ["GroupFailed", "Ready", "_GroupWorker"]


@dataclass(frozen=True, slots=True)
class Ready:
    """What a worker reports after trying to load the bundle (``reason`` when it failed)."""

    node_ip: str
    node_id: str
    reason: str | None


@dataclass(frozen=True, slots=True)
class GroupFailed:
    """``run_group`` raised on the worker: the error, re-raised by the driver."""

    error: BaseException
    logs: list[LogEntry]


class _GroupWorker:
    """The body of a Ray worker actor: one environment, many groups at once."""

    def __init__(
        self,
        bundle: Bundle,
        config: RunConfig,
        run_id: str,
        constructor_args: dict[str, Any],
        env_attributes: dict[str, Any],
    ) -> None:
        self._bundle = bundle
        self._config = config
        self._run_id = run_id
        self._constructor_args = constructor_args
        self._env_attributes = env_attributes
        self._collector: GroupCollector | None = None
        self._stack = contextlib.ExitStack()
        self._heartbeat = LoopHeartbeat()

    async def loop_state(self) -> LoopState:
        """How the groups' loop is doing; called in its own concurrency group (thread)."""
        return self._heartbeat.state()

    async def start(self) -> Ready:
        import ray

        self._heartbeat.start()
        # What this worker prints reaches Ray's session logs and the driver's terminal:
        # the run's credentials are masked in it, as the driver masks its own output.
        remember(*self._config.secrets())
        mask_standard_streams()

        context = ray.get_runtime_context()
        # Ray leaves this public helper unannotated; it returns the node's IP as a str.
        node_ip: str = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
        node_id = context.get_node_id()
        try:
            env = self._load()
        except Exception as error:
            reason = mask_secrets(f"{type(error).__name__}: {error}", self._config.secrets())
            return Ready(node_ip, node_id, re.sub(r"\s+", " ", reason).strip())
        self._collector = GroupCollector(env, self._config, self._run_id)
        self._stack.enter_context(self._collector.pipeline.attached())
        return Ready(node_ip, node_id, None)

    def _load(self) -> Environment[Any, Any]:
        validate_bundle_compatibility(self._bundle.metadata)
        env_class, bundled_args = load_bundle(self._bundle, instantiate=False)
        env = env_class(**{**bundled_args, **self._constructor_args})
        attributes = dict(self._env_attributes)
        apply_limits(
            env, {name: attributes.pop(name) for name in LIMIT_NAMES if name in attributes}
        )
        for name, value in attributes.items():  # anything else the caller sets
            setattr(env, name, value)
        return env

    async def run(self, job: GroupJob) -> TrajectoryGroup | GroupFailed:
        # In a context of its own that names the group, which every task it starts inherits:
        # loop_state finds the group whose code blocks the loop.
        context = group_context(job.example_index)
        return await asyncio.create_task(self._run(job), context=context)

    async def _run(self, job: GroupJob) -> TrajectoryGroup | GroupFailed:
        assert self._collector is not None, "start() must succeed first"
        try:
            result = await self._collector.collect(job)
        except Exception as error:
            return GroupFailed(_portable(error), self._collector.failed_logs(job))
        return dataclasses.replace(result, trajectories=_as_json(result.trajectories))

    async def close(self) -> None:
        self._stack.close()
        if self._collector is not None:
            await self._collector.env.aclose()


def _as_json(trajectories: tuple[Trajectory, ...]) -> tuple[Trajectory, ...]:
    """``trajectories`` holding plain JSON values only: what the results file would hold.

    The results writer encodes with ``default=str``, so a round trip through the same
    encoding yields identical lines and nothing unpicklable crosses the wire.
    """
    return tuple(
        Trajectory.from_json(json.loads(json.dumps(t.to_json(), ensure_ascii=False, default=str)))
        for t in trajectories
    )


def _portable(error: BaseException) -> BaseException:
    """``error`` when it pickles, else a ``RuntimeError`` carrying its type and message."""
    try:
        cloudpickle.dumps(error)
    except Exception:
        return RuntimeError(f"{type(error).__name__}: {error}")
    return error
