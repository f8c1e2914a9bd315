"""Run one group for a trainer and keep its trajectories; read them back from a results file."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from benchmax._group_pipeline import Group, GroupPipeline, HookDeadlines
from benchmax.envs import Environment, RolloutOutcome, RolloutRequest
from benchmax.runner import iter_results
from benchmax.training._advantages import AdvantageMethod, group_advantages, scalar_reward
from benchmax.trajectory import Trajectory

__all__ = ["CollectedGroup", "collect_group", "read_trajectories"]

_DEFAULT_DEADLINES = HookDeadlines()


@dataclass(frozen=True, slots=True)
class CollectedGroup:
    """One group as a trainer needs it.

    ``outcomes`` is exactly what ``run_group`` returned (rollout id -> ``RolloutOutcome``);
    ``trajectories`` holds one record per request, in request order, with the final
    outcome; ``scalar_rewards`` one number per trajectory by the environment's
    ``reward_weights`` (see ``scalar_reward``).
    """

    outcomes: Mapping[str, RolloutOutcome]
    trajectories: tuple[Trajectory, ...]
    scalar_rewards: tuple[float, ...]

    def advantages(self, method: AdvantageMethod = "grpo") -> list[float]:
        """One advantage per trajectory, computed over the trainable ones only.

        Non-trainable rollouts (``Trajectory.trainable`` is false: operational failures)
        get 0.0 and should be masked out of the loss; their zero rewards do not move the
        group's baseline. All zeros when no rollout is trainable.
        """
        kept = [i for i, t in enumerate(self.trajectories) if t.trainable]
        advantages = [0.0] * len(self.trajectories)
        if kept:
            values = group_advantages([self.scalar_rewards[i] for i in kept], method)
            for i, value in zip(kept, values, strict=True):
                advantages[i] = value
        return advantages


async def collect_group(
    env: Environment[Any, Any],
    requests: Sequence[RolloutRequest[object]],
    *,
    hook_deadlines: HookDeadlines | None = _DEFAULT_DEADLINES,
) -> CollectedGroup:
    """Run one group of ``requests`` through ``env`` and return its outcomes with the
    trajectories.

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
    finished = await pipeline.run(Group(tuple(requests)))
    weights = getattr(env, "reward_weights", None)
    return CollectedGroup(
        outcomes=finished.outcomes,
        trajectories=finished.trajectories,
        scalar_rewards=tuple(scalar_reward(t.rewards, weights) for t in finished.trajectories),
    )


def read_trajectories(path: str | Path) -> Iterator[Trajectory]:
    """The trajectories of a results file's complete groups, with everything recorded
    (token ids and logprobs included), for building samples offline.

    The file is streamed (memory holds one group, whatever its size): groups come in the
    order they were written, each in group order. Raises ``ResultsFileError`` for a file
    that is not a readable results file, or (when the stream reaches it) a damaged line.
    """
    stream = iter_results(path)
    next(stream)  # the header
    for record in stream:
        yield cast(Trajectory, record)
