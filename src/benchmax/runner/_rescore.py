"""``rescore_results``: score the stored transcripts of a run again, without the model.

After editing ``compute_reward`` or ``compute_group_rewards``, rescoring replays each
group's finished transcripts through the environment's reward hooks and writes a new
results file. Groups go through ``Environment.run_group`` itself (the same validation,
group-hook merge and settling of failures as a run); only the model loop is replaced by the
stored transcript.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmax._group_pipeline import Group, GroupPipeline, run_pool
from benchmax._observer import report_rollout
from benchmax._vocabulary import SCORING_FAILURES
from benchmax.auth import ModelAuth
from benchmax.envs import BaseEnv, BaseRollout
from benchmax.envs.base._scoring import score_rollout
from benchmax.envs.dataset import Dataset
from benchmax.envs.environment import Environment
from benchmax.envs.shared_types import (
    FINISHED,
    DatasetSplit,
    Example,
    RewardMap,
    RolloutRequest,
)
from benchmax.results import (
    Results,
    RewardStats,
    RunDefinition,
    RunError,
    TrajectoryGroup,
    groups_of,
    new_run_id,
    read_results,
    write_results,
)
from benchmax.runner._config import NoModelAuth, credential_secrets
from benchmax.runner._errors import GroupContractError
from benchmax.trajectory import Trajectory, recording_annotations

__all__ = ["RESCORED_REASONS", "RescoreReport", "rescore_results"]

logger = logging.getLogger(__name__)

RESCORED_REASONS = frozenset({FINISHED}) | SCORING_FAILURES
"""Rollouts that ended with one of these reasons reached scoring, so they are scored again;
any other reason (a model, tool or turn-limit failure) is kept, with zero rewards."""

_MAX_LISTED = 5


@dataclass(frozen=True, slots=True)
class RescoreReport:
    """What a rescore wrote and how the rewards moved.

    ``rescored`` counts the rollouts whose hooks ran again, ``kept`` those that keep the
    reason they ended with; ``changed`` the rollouts whose rewards or reason differ from the
    source. ``missing_examples`` lists example ids of the source left out because the
    dataset no longer has them (only with ``allow_missing=True``).
    """

    source: Path
    output: Path
    run_id: str
    groups: int
    rollouts: int
    rescored: int
    kept: int
    changed: int
    old_stats: Mapping[str, RewardStats]
    new_stats: Mapping[str, RewardStats]
    old_reasons: Mapping[str, int]
    new_reasons: Mapping[str, int]
    missing_examples: tuple[str, ...]


class _Replay(Environment[Any, BaseRollout]):
    """An environment whose rollouts are the stored transcripts, scored by ``inner``; each
    reports its stored record with this rescore's run id, ``reward_seconds`` and
    annotations, so the group pipeline writes it as is (with its outcome and new logs)."""

    def __init__(self, inner: BaseEnv, records: Mapping[str, Trajectory], run_id: str) -> None:
        self.inner = inner
        self.records = records
        self.run_id = run_id

    @property
    def reward_keys(self) -> Sequence[str]:
        return self.inner.reward_keys

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> Dataset[Any]:
        raise NotImplementedError("a replay has no dataset of its own")

    async def run_rollout(self, request: RolloutRequest[Any]) -> BaseRollout:
        """Score the stored transcript exactly as ``BaseEnv`` scores a run's rollout
        (reward_timeout, reward_error, non-finite values); a rollout that never reached
        scoring keeps its reason and zero rewards."""
        record = self.records[request.rollout_id]
        reason = record.termination_reason
        payload = request.example.payload
        example_args = {k: v for k, v in payload.items() if k != "prompt_messages"}
        started = time.perf_counter()
        with recording_annotations() as annotations:
            rollout = await score_rollout(
                self.inner,
                request,
                self.inner.reward_timeout,
                FINISHED if reason in RESCORED_REASONS else reason,
                [dict(message) for message in record.messages or ()],
                example_args,
                None,
                rollout_type=BaseRollout,
            )
        timings = {**record.timings, "reward_seconds": round(time.perf_counter() - started, 6)}
        annotations = {**record.annotations, **annotations}
        report_rollout(
            dataclasses.replace(
                record, run_id=self.run_id, timings=timings, annotations=annotations
            )
        )
        return rollout

    async def compute_group_rewards(
        self, rollouts: Sequence[BaseRollout]
    ) -> Mapping[str, RewardMap] | None:
        return await self.inner.compute_group_rewards(rollouts)


async def rescore_results(
    env: BaseEnv,
    results_path: str | Path,
    output: str | Path,
    *,
    base_dir: str | Path,
    env_definition: Mapping[str, Any] | None = None,
    auth_providers: Mapping[str, ModelAuth] | None = None,
    allow_missing: bool = False,
    max_concurrent_groups: int = 8,
) -> RescoreReport:
    """Score the transcripts of ``results_path`` again with ``env``'s reward hooks.

    The examples come from ``env.create_dataset(split, base_dir)`` (the split of the
    results header), matched by example id; each rollout is rebuilt as a ``BaseRollout``
    (its stored transcript, the example's payload fields as ``example_args``) and its
    group goes through ``run_group``: rollouts that reached scoring (``RESCORED_REASONS``)
    get ``compute_reward`` and ``compute_group_rewards`` again, others keep their reason
    and zero rewards, and failing hooks settle as in a run (``reward_error``, the reason of
    a ``RolloutFailure``, ``group_reward_error``). No model is called; judges are, with
    credentials bound from ``auth_providers`` (their bearer keys are masked in the logs
    kept).

    Writes ``output`` (a new results file, replaced if present) whose header copies the
    source's definition (its ``env`` replaced by ``env_definition`` when given) and adds
    ``rescored_from``: the source path, its run id and its ``env`` definition (with any
    source or bundle digest it recorded). Records keep their rollout ids, transcripts,
    model calls, usage, logs (the rescore's log records are appended) and annotations
    (what the hooks ``annotate`` now replaces the same keys); timings keep the run's
    values except ``reward_seconds``.

    Raises ``RunError`` when ``output`` is ``results_path`` itself, when examples are
    missing from the dataset (unless ``allow_missing``, which leaves their groups out), when
    a rollout to rescore has no transcript, or when the split cannot be loaded;
    ``GroupContractError`` when a hook breaks the reward contract (nothing is written
    then); ``ResultsFileError`` for a file that is not a results file.
    """
    source, target = _checked_paths(env, results_path, output, max_concurrent_groups)
    results = read_results(source)
    definition = dict(results.definition)
    groups, payloads, missing = await _groups_to_rescore(
        env, results, source, Path(base_dir), allow_missing
    )
    run_id = new_run_id()
    rescored = await _rescored(
        env, groups, payloads, definition, run_id, dict(auth_providers or {}), max_concurrent_groups
    )
    rescored_from = {"path": str(source), "run_id": results.header.get("run_id")}
    new_definition = RunDefinition(
        {**definition, "env": dict(env_definition or definition.get("env") or {})},
        data_dir=Path(base_dir),
    )
    write_results(
        target,
        new_definition,
        rescored,
        run_id=run_id,
        rescored_from={**rescored_from, "env": definition.get("env")},
    )
    new_records = [t for group in rescored for t in group.trajectories]
    return _report(source, target, run_id, groups, new_records, missing)


def _checked_paths(
    env: object, results_path: str | Path, output: str | Path, max_concurrent_groups: int
) -> tuple[Path, Path]:
    if not isinstance(env, BaseEnv):
        raise RunError(
            f"rescoring needs a BaseEnv environment (stored transcripts); got {type(env).__name__}"
        )
    if max_concurrent_groups < 1:
        raise ValueError("max_concurrent_groups must be at least 1")
    source = Path(results_path)
    target = Path(output)
    if target.resolve() == source.resolve():
        raise RunError(
            f"the output {target} would replace the results it rescores; "
            "write the rescored run to another file"
        )
    return source, target


async def _groups_to_rescore(
    env: BaseEnv, results: Results, source: Path, base_dir: Path, allow_missing: bool
) -> tuple[list[TrajectoryGroup], dict[str, Any], tuple[str, ...]]:
    """The groups of ``results`` whose examples the split has, the payloads by example id
    and the example ids missing from it (a ``RunError`` unless ``allow_missing``)."""
    split = results.definition.get("split", "eval")
    payloads = await _payloads(env, split, base_dir)
    groups = groups_of(results)
    missing = [g.example_id for g in groups if g.example_id not in payloads]
    if missing and not allow_missing:
        shown = ", ".join(missing[:_MAX_LISTED]) + (" ..." if len(missing) > _MAX_LISTED else "")
        raise RunError(
            f"{len(missing)} of {len(groups)} example(s) of {source} are not in the {split} "
            f"split under {base_dir} (matched by example id): {shown}; "
            "pass the --data directory the run used"
        )
    groups = [g for g in groups if g.example_id in payloads]
    for group in groups:
        for record in group.trajectories:
            if record.messages is None and record.termination_reason in RESCORED_REASONS:
                raise RunError(
                    f"rollout {record.rollout_id} of {source} has no transcript to score "
                    "(only BaseEnv runs record transcripts)"
                )
    return groups, payloads, tuple(missing)


async def _rescored(
    env: BaseEnv,
    groups: Sequence[TrajectoryGroup],
    payloads: Mapping[str, Any],
    definition: Mapping[str, Any],
    run_id: str,
    providers: dict[str, ModelAuth],
    max_concurrent_groups: int,
) -> list[TrajectoryGroup]:
    """Every group scored again through the group pipeline, in example order."""
    records = {r.rollout_id: r for group in groups for r in group.trajectories}
    pipeline = GroupPipeline(
        _Replay(env, records, run_id),
        auth_providers=providers,
        secrets=credential_secrets(providers.values(), None),
        log_level=logging.INFO,
    )
    split = definition.get("split", "eval")
    model = str(definition.get("model") or "rescore")
    rewritten: dict[int, TrajectoryGroup] = {}

    async def rescore(group: TrajectoryGroup) -> None:
        example = Example(id=group.example_id, payload=payloads[group.example_id])
        requests = tuple(
            RolloutRequest(
                rollout_id=record.rollout_id,
                example=example,
                model=model,
                base_url="http://rescore.invalid/v1",
                model_auth=NoModelAuth(),
                split=split,
            )
            for record in group.trajectories
        )
        rewritten[group.example_index or 0] = await pipeline.run(Group(requests, placement=None))

    def contract_error(group: TrajectoryGroup, error: Exception) -> BaseException:
        pipeline.take_failed_logs([r.rollout_id for r in group.trajectories])
        return GroupContractError(group.example_index or 0, group.example_id, error)

    with pipeline.attached():
        await run_pool(groups, rescore, concurrency=max_concurrent_groups, on_error=contract_error)
    return [rewritten[index] for index in sorted(rewritten)]


def _report(
    source: Path,
    target: Path,
    run_id: str,
    groups: Sequence[TrajectoryGroup],
    new_records: Sequence[Trajectory],
    missing: tuple[str, ...],
) -> RescoreReport:
    old_records = [r for g in groups for r in g.trajectories]
    return RescoreReport(
        source=source,
        output=target,
        run_id=run_id,
        groups=len(groups),
        rollouts=len(new_records),
        rescored=sum(r.termination_reason in RESCORED_REASONS for r in old_records),
        kept=sum(r.termination_reason not in RESCORED_REASONS for r in old_records),
        changed=sum(
            (old.rewards, old.termination_reason) != (new.rewards, new.termination_reason)
            for old, new in zip(old_records, new_records, strict=True)
        ),
        old_stats=_stats(old_records),
        new_stats=_stats(new_records),
        old_reasons=dict(Counter(r.termination_reason for r in old_records)),
        new_reasons=dict(Counter(r.termination_reason for r in new_records)),
        missing_examples=missing,
    )


async def _payloads(env: BaseEnv, split: Any, base_dir: Path) -> dict[str, Any]:
    """Example id -> payload for every example of the split (the first of duplicate ids)."""
    try:
        dataset = await env.create_dataset(split, base_dir)
        payloads: dict[str, Any] = {}
        for example in dataset:
            payloads.setdefault(example.id, example.payload)
        return payloads
    except FileNotFoundError as error:
        raise RunError(f"data file not found: {error.filename or error}") from error
    except RunError:
        raise
    except Exception as error:
        raise RunError(
            f"cannot load the {split} split from {base_dir}: {type(error).__name__}: {error}"
        ) from error


def _stats(records: Sequence[Trajectory]) -> dict[str, RewardStats]:
    values: dict[str, list[float]] = {}
    for record in records:
        for key, value in record.rewards.items():
            if math.isfinite(value):
                values.setdefault(key, []).append(float(value))
    return {key: RewardStats.of(vals) for key, vals in values.items()}
