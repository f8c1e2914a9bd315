"""``GroupPipeline``: one group of rollouts, run and recorded the one way every caller does."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchmax._group_pipeline.log_capture import RolloutLogCapture
from benchmax._hook_deadlines import HookDeadlines, with_hook_deadlines
from benchmax._observer import observe_rollouts
from benchmax._secret_masking import credential_secrets
from benchmax.auth import ModelAuth, bind_model_auth
from benchmax.envs.environment import Environment
from benchmax.envs.shared_types import RolloutOutcome, RolloutRequest
from benchmax.results import TrajectoryGroup
from benchmax.trajectory import LogEntry, Trajectory

__all__ = ["Group", "GroupPipeline", "Placement"]


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a group's trajectories sit in a run: its ``run_id`` (``None``: in no run), its
    example's ``example_index`` in the split (``None``: unknown) and its ``attempt``
    (1 for a group's first run). Each trajectory also gets its request's ``split`` and
    its position in the group as ``group_index``."""

    run_id: str | None = None
    example_index: int | None = None
    attempt: int = 1


@dataclass(frozen=True, slots=True)
class Group:
    """One group to run: its ``requests`` (one example, distinct rollout ids, exactly as
    ``Environment.run_group`` takes them) and where its trajectories go.

    ``placement=None`` keeps each trajectory exactly as the environment reported it (with
    its outcome and the captured logs added after the reported ones): for a replay that
    reports whole stored records, as rescoring does.
    """

    requests: tuple[RolloutRequest[Any], ...]
    placement: Placement | None = Placement()

    @property
    def rollout_ids(self) -> tuple[str, ...]:
        return tuple(request.rollout_id for request in self.requests)


_DEFAULT_DEADLINES = HookDeadlines()


class _Reports:
    """Keeps what the environment reports about the rollouts of the groups in flight."""

    def __init__(self) -> None:
        self._by_id: dict[str, Trajectory | None] = {}

    def expect(self, rollout_ids: Sequence[str]) -> None:
        self._by_id.update(dict.fromkeys(rollout_ids))

    def rollout_finished(self, report: Trajectory) -> None:
        if report.rollout_id in self._by_id:
            self._by_id[report.rollout_id] = report

    def take(self, rollout_id: str) -> Trajectory | None:
        return self._by_id.pop(rollout_id, None)


class GroupPipeline:
    """Runs groups of one environment: binds credentials, observes rollouts, captures and
    masks their logs, and builds each rollout's ``Trajectory``.

    ``auth_providers`` are bound with ``bind_model_auth`` while a group runs (``None``:
    the caller's binding, if any, stays); ``secrets``, and the credentials of every request
    run (bearer tokens, URL passwords), are masked in the log records kept;
    records at ``log_level`` and above are kept, and with ``pass_on_logs`` they are also
    printed as if nothing captured them (when no handler of the caller's sees them).
    ``hook_deadlines`` bound the hooks the environment leaves unbounded (a hook that never
    returns settles its rollout, naming the hook and the line it waited at; see
    ``benchmax._hook_deadlines``); ``None`` binds none.
    """

    def __init__(
        self,
        env: Environment[Any, Any],
        *,
        auth_providers: Mapping[str, ModelAuth] | None = None,
        secrets: Sequence[str] = (),
        log_level: int = logging.WARNING,
        pass_on_logs: bool = False,
        hook_deadlines: HookDeadlines | None = _DEFAULT_DEADLINES,
    ) -> None:
        self.env = env
        self._deadlines = hook_deadlines
        self._providers = None if auth_providers is None else dict(auth_providers)
        self._capture = RolloutLogCapture(log_level, secrets, pass_on=pass_on_logs)
        self._reports = _Reports()
        self._attached = 0
        self._detach = contextlib.ExitStack()
        self._failed: dict[tuple[str, ...], list[LogEntry]] = {}

    @contextlib.contextmanager
    def attached(self) -> Iterator[None]:
        """Keep the log capture on the root logger for the whole block (records no rollout
        owns are then masked too); ``run`` attaches it for its group otherwise."""
        if self._attached == 0:
            self._detach.enter_context(self._capture.attached())
        self._attached += 1
        try:
            yield
        finally:
            self._attached -= 1
            if self._attached == 0:
                self._detach.close()

    async def run(self, group: Group) -> TrajectoryGroup:
        """Run ``group`` through ``run_group`` and record it.

        Rollout failures settle as outcomes; what ``run_group`` raises (a contract error,
        a cancellation) propagates unchanged, and the records the group logged until then
        are kept for ``take_failed_logs``.
        """
        ids = group.rollout_ids
        for request in group.requests:
            self._capture.mask_also(
                credential_secrets([request.model_auth], request.base_url, warn=False)
            )
        self._capture.track(ids)
        self._reports.expect(ids)
        began = time.perf_counter()
        try:
            with self.attached(), self._bound():
                outcomes = await self.env.run_group(group.requests)
        except BaseException:
            logs: list[LogEntry] = []
            for rollout_id in ids:
                logs.extend(e for e in self._capture.take(rollout_id) if e not in logs)
                self._reports.take(rollout_id)
            self._failed[ids] = logs
            raise
        seconds = time.perf_counter() - began
        trajectories = tuple(
            _trajectory(
                self._reports.take(request.rollout_id),
                request,
                outcomes[request.rollout_id],
                self._capture.take(request.rollout_id),
                group_index=k,
                placement=group.placement,
                group_seconds=seconds,
            )
            for k, request in enumerate(group.requests)
        )
        weights = getattr(self.env, "reward_weights", None)
        try:
            return TrajectoryGroup(trajectories, weights if isinstance(weights, Mapping) else None)
        except TypeError:  # weights that weigh nothing: the group is kept all the same
            return TrajectoryGroup(trajectories)

    def take_failed_logs(self, rollout_ids: Sequence[str]) -> list[LogEntry]:
        """The records the group of ``rollout_ids`` logged before ``run`` raised (each
        once); forgotten once taken."""
        return self._failed.pop(tuple(rollout_ids), [])

    @contextlib.contextmanager
    def _bound(self) -> Iterator[None]:
        with observe_rollouts(self._reports), with_hook_deadlines(self._deadlines):
            if self._providers is None:
                yield
            else:
                with bind_model_auth(self._providers):
                    yield


def _trajectory(
    report: Trajectory | None,
    request: RolloutRequest[Any],
    outcome: RolloutOutcome,
    logs: list[LogEntry],
    *,
    group_index: int,
    placement: Placement | None,
    group_seconds: float,
) -> Trajectory:
    """One rollout's record: what the environment reported (nothing for environments
    that do not report) with its final outcome, its logs and its place."""
    if report is None:
        report = Trajectory(
            rollout_id=request.rollout_id,
            example_id=request.example.id,
            termination_reason=outcome.termination_reason,
            rewards={},
        )
    reason, rewards = outcome.termination_reason, dict(outcome.rewards)
    kept = (*report.logs, *logs)
    if placement is None:
        return dataclasses.replace(report, termination_reason=reason, rewards=rewards, logs=kept)
    return dataclasses.replace(
        report,
        termination_reason=reason,
        rewards=rewards,
        logs=kept,
        timings={"group_seconds": round(group_seconds, 6), **report.timings},
        attempt=placement.attempt,
        run_id=placement.run_id,
        split=request.split,
        example_index=placement.example_index,
        group_index=group_index,
    )
