"""Run one group for a trainer and keep its trajectories; read them back from a results file."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmax.envs import Environment, RolloutOutcome, RolloutRequest
from benchmax.envs._observer import observe_rollouts
from benchmax.runner import read_results
from benchmax.training._advantages import AdvantageMethod, group_advantages, scalar_reward
from benchmax.trajectory import Trajectory

__all__ = ["CollectedGroup", "collect_group", "read_trajectories"]


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


class _Reports:
    """Keeps what BaseEnv reports about this group's rollouts (and nothing else)."""

    def __init__(self, rollout_ids: Sequence[str]) -> None:
        self.by_id: dict[str, Trajectory | None] = dict.fromkeys(rollout_ids)

    def rollout_finished(self, report: Trajectory) -> None:
        if report.rollout_id in self.by_id:
            self.by_id[report.rollout_id] = report


async def collect_group(
    env: Environment[Any, Any], requests: Sequence[RolloutRequest[Any]]
) -> CollectedGroup:
    """Run ``env.run_group(requests)`` and return its outcomes with the trajectories.

    ``requests`` are one group (the same example, distinct rollout ids), exactly as
    ``run_group`` takes them; set per-rollout ``sampling_args`` there (e.g. ``seed`` from
    ``rollout_seed``). Nothing is written to a file. For ``BaseEnv`` environments a
    trajectory holds the transcript, one ``ModelCall`` per model call (token ids and
    logprobs when the requests ask for them), tool timings, usage and annotations; for
    other environments only the outcome. ``group_index`` is the request's position,
    ``attempt`` 1, ``run_id``/``example_index`` ``None``, ``logs`` empty (logging goes to
    your own handlers), ``timings["group_seconds"]`` the whole group's time.

    Raises what ``run_group`` raises (contract errors); rollout failures settle as
    outcomes, as in ``run_group``.
    """
    requests = list(requests)
    reports = _Reports([request.rollout_id for request in requests])
    started = time.perf_counter()
    with observe_rollouts(reports):
        outcomes = await env.run_group(requests)
    group_seconds = round(time.perf_counter() - started, 6)
    trajectories = tuple(
        _placed(reports.by_id.get(request.rollout_id), request, outcomes, index, group_seconds)
        for index, request in enumerate(requests)
    )
    weights = getattr(env, "reward_weights", None)
    return CollectedGroup(
        outcomes=outcomes,
        trajectories=trajectories,
        scalar_rewards=tuple(scalar_reward(t.rewards, weights) for t in trajectories),
    )


def _placed(
    report: Trajectory | None,
    request: RolloutRequest[Any],
    outcomes: Mapping[str, RolloutOutcome],
    index: int,
    group_seconds: float,
) -> Trajectory:
    outcome = outcomes[request.rollout_id]
    if report is None:
        report = Trajectory(
            rollout_id=request.rollout_id,
            example_id=request.example.id,
            termination_reason=outcome.termination_reason,
            rewards={},
        )
    return dataclasses.replace(
        report,
        termination_reason=outcome.termination_reason,
        rewards=dict(outcome.rewards),
        split=request.split,
        group_index=index,
        timings={"group_seconds": group_seconds, **report.timings},
    )


def read_trajectories(path: str | Path) -> Iterator[Trajectory]:
    """The trajectories of a results file's complete groups, in example then group order,
    with everything recorded (token ids and logprobs included), for building samples
    offline. Raises ``ResultsFileError`` for a file that is not a readable results file.
    """
    yield from read_results(path).rollouts
