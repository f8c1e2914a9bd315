"""Run one group for a trainer and keep its trajectories."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmax._group_pipeline import Group, GroupPipeline, HookDeadlines
from benchmax.envs import Environment, RolloutRequest
from benchmax.results import TrajectoryGroup

__all__ = ["collect_group"]

_DEFAULT_DEADLINES = HookDeadlines()


async def collect_group(
    env: Environment[Any, Any],
    requests: Sequence[RolloutRequest[object]],
    *,
    hook_deadlines: HookDeadlines | None = _DEFAULT_DEADLINES,
) -> TrajectoryGroup:
    """Run one group of ``requests`` through ``env`` and return it as a ``TrajectoryGroup``:
    one ``Trajectory`` per request, in request order, with the final outcome
    (``.outcomes`` holds what ``run_group`` returned, keyed by rollout id) and the
    environment's ``reward_weights`` (``.scalar_rewards``, ``.advantages(method)``).

    ``requests`` are one group (the same example, distinct rollout ids), exactly as
    ``run_group`` takes them; set per-rollout ``sampling_args`` there (e.g. ``seed`` from
    ``rollout_seed``). Nothing is written to a file. The group runs through the same
    pipeline as ``benchmax run``, so for ``BaseEnv`` environments a trajectory holds what
    a run records: the transcript, one ``ModelCall`` per model call (token ids and
    logprobs when the requests ask for them), tool timings, usage, annotations and the
    log records (WARNING and above) emitted in the rollout, which also still reach your
    own handlers (or the terminal); for other environments only the outcome and logs.
    ``group_index`` is the request's position, ``attempt`` 1, ``run_id``/``example_index``
    ``None``, ``timings["group_seconds"]`` the whole group's time. ``hook_deadlines``
    bound the hooks the environment leaves unbounded, as in a run (by default 15 minutes
    each; see ``benchmax.runner.HookDeadlines``), so a hook that never returns settles its
    rollout instead of hanging; ``None`` sets none.

    Raises what ``run_group`` raises (contract errors); rollout failures settle as
    outcomes, as in ``run_group``.
    """
    pipeline = GroupPipeline(env, pass_on_logs=True, hook_deadlines=hook_deadlines)
    return await pipeline.run(Group(tuple(requests)))
