"""The group-native environment base and its group executor ``run_group``."""

from __future__ import annotations

import asyncio
import logging
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path

from benchmax._cancellation import stray_cancellation_as_error
from benchmax._hook_deadlines import deadline_for
from benchmax.envs._hook_errors import (
    NotAsyncHook,
    blame_hook,
    exits_as_errors,
    hook_errors,
    must_await,
)
from benchmax.envs._reward_keys import declared_reward_keys
from benchmax.envs.dataset import Dataset
from benchmax.envs.logging import group_context, rollout_context
from benchmax.envs.shared_types import (
    FINISHED,
    GROUP_REWARD_ERROR,
    DatasetSplit,
    RewardMap,
    RewardShapeError,
    RolloutAttempt,
    RolloutFailure,
    RolloutOutcome,
    RolloutRequest,
)

__all__ = ["Environment"]

logger = logging.getLogger(__name__)


class Environment[Payload, Attempt: RolloutAttempt](ABC):
    """Base class of every environment: a dataset, one rollout, and group scoring.

    ``run_group`` runs one group of rollouts of a single example concurrently,
    settles operational failures as zero-valued outcomes, and raises contract
    violations only after every sibling has settled.
    """

    @property
    @abstractmethod
    def reward_keys(self) -> Sequence[str]:
        """The complete, ordered reward shape of every outcome."""

    reward_weights: Mapping[str, float] | None = None
    """How a trainer turns a reward map into one scalar (beyond 0.2): the scalar is
    ``sum(weight * rewards[key])`` over these keys. ``None`` (the default) weighs every
    reward key 1.0 (the sum of the map). See ``benchmax.training.scalar_reward``."""

    @abstractmethod
    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> Dataset[Payload]:
        """Return the fixed, ordered dataset for ``split``."""

    @abstractmethod
    async def run_rollout(self, request: RolloutRequest[Payload]) -> Attempt:
        """Run one physical rollout attempt for ``request``."""

    @property
    def requires_public_model_endpoint(self) -> bool:
        """Whether rollouts need a publicly reachable model URL (remote sandboxes)."""
        return False

    async def compute_group_rewards(
        self, rollouts: Sequence[Attempt]
    ) -> Mapping[str, RewardMap] | None:
        """Return per-rollout rewards that depend on the whole group, or ``None``."""
        return None

    async def aclose(self) -> None:
        """Release shared resources; a no-op by default."""

    async def run_group(
        self, requests: Sequence[RolloutRequest[Payload]]
    ) -> Mapping[str, RolloutOutcome]:
        """Run, score and validate one complete rollout group."""
        group = tuple(requests)
        _validate_group(group)
        declared = declared_reward_keys(self.reward_keys)

        tasks = [
            asyncio.create_task(
                self._run_checked_rollout(request),
                name=f"benchmax-rollout-{request.rollout_id}",
            )
            for request in group
        ]
        try:
            results = await asyncio.gather(*tasks, return_exceptions=True)
        except BaseException:
            for task in tasks:
                if not task.done():
                    task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

        outcomes: dict[str, RolloutOutcome] = {}
        finished: list[Attempt] = []
        contract_errors: list[BaseException] = []
        for request, result in zip(group, results, strict=True):
            rollout_id = request.rollout_id
            if isinstance(result, RolloutFailure):
                logger.error(
                    "benchmax.rollout.failed rollout_id=%s termination_reason=%s: %s",
                    rollout_id,
                    result.termination_reason,
                    result,
                    exc_info=result,
                    extra={"rollout_id": rollout_id},
                )
                outcomes[rollout_id] = _zero_outcome(declared, result.termination_reason)
            elif isinstance(result, BaseException):
                contract_errors.append(result)
            elif result.termination_reason != FINISHED:
                rewards = dict(result.rewards or {})
                _check_reward_shape(rollout_id, rewards, declared)
                nonzero = sorted(key for key, value in rewards.items() if value != 0)
                if nonzero:
                    raise ValueError(
                        f"failed rollout {rollout_id!r} has non-zero rewards: {nonzero}"
                    )
                logger.warning(
                    "benchmax.rollout.terminated rollout_id=%s termination_reason=%s",
                    rollout_id,
                    result.termination_reason,
                    extra={"rollout_id": rollout_id},
                )
                outcomes[rollout_id] = RolloutOutcome(
                    rewards=rewards, termination_reason=result.termination_reason
                )
            else:
                finished.append(result)

        if contract_errors:
            for error in contract_errors[1:]:
                logger.error(
                    "additional rollout contract error: %s",
                    error,
                    exc_info=error,
                    extra={"rollout_ids": tuple(request.rollout_id for request in group)},
                )
            raise contract_errors[0]

        if finished:
            outcomes.update(await self._score_finished(finished, declared))
        return {request.rollout_id: outcomes[request.rollout_id] for request in group}

    async def _run_checked_rollout(self, request: RolloutRequest[Payload]) -> Attempt:
        with rollout_context(request.rollout_id), hook_errors(self, "run_rollout"):
            result = await self.run_rollout(request)
        if not isinstance(result, RolloutAttempt):
            raise TypeError(
                f"run_rollout returned {type(result).__name__}, expected RolloutAttempt"
            )
        if result.rollout_id != request.rollout_id:
            raise ValueError(
                "run_rollout returned the wrong rollout ID: "
                f"expected {request.rollout_id!r}, got {result.rollout_id!r}"
            )
        return result

    async def _score_finished(
        self, finished: list[Attempt], declared: tuple[str, ...]
    ) -> dict[str, RolloutOutcome]:
        ids = tuple(attempt.rollout_id for attempt in finished)
        deadline = deadline_for("compute_group_rewards")
        timer = asyncio.timeout(deadline.seconds)
        try:
            with (
                group_context(ids),
                exits_as_errors(self, "compute_group_rewards"),
                stray_cancellation_as_error(f"{type(self).__name__}.compute_group_rewards"),
            ):
                async with timer:
                    group_rewards = await must_await(
                        self, "compute_group_rewards", self.compute_group_rewards(finished)
                    )
            merged = _merge_group_rewards(self, finished, group_rewards, declared)
            _check_finite_group_rewards(merged)
        except NotAsyncHook:
            raise  # a contract error: every group would fail the same way
        except RolloutFailure as failure:
            logger.error(
                "benchmax.rollout.failed rollout_id=group termination_reason=%s: %s",
                failure.termination_reason,
                failure,
                exc_info=failure,
                extra={"rollout_ids": ids},
            )
            return {rid: _zero_outcome(declared, failure.termination_reason) for rid in ids}
        except Exception as error:
            if isinstance(error, TimeoutError) and timer.expired():
                hook = f"compute_group_rewards (rollouts {', '.join(ids)})"
                logger.error(
                    "benchmax.rollout.failed rollout_id=group "
                    "termination_reason=group_reward_error: %s",
                    deadline.expired_message(hook, error, type(self).compute_group_rewards),
                    extra={"rollout_ids": ids},
                )
            else:
                logger.error(
                    "benchmax.rollout.failed rollout_id=group "
                    "termination_reason=group_reward_error: %s",
                    error,
                    exc_info=error,
                    extra={"rollout_ids": ids},
                )
            return {rid: _zero_outcome(declared, GROUP_REWARD_ERROR) for rid in ids}
        with hook_errors(self, "compute_group_rewards"):
            return {
                attempt.rollout_id: RolloutOutcome(
                    rewards=merged[attempt.rollout_id],
                    termination_reason=attempt.termination_reason,
                )
                for attempt in finished
            }


def _validate_group(group: tuple[RolloutRequest[object], ...]) -> None:
    if not group:
        raise ValueError("rollout group must contain at least one request")
    if len({request.rollout_id for request in group}) != len(group):
        raise ValueError("rollout group contains duplicate rollout IDs")
    if len({request.example.id for request in group}) > 1:
        raise ValueError("all rollout requests in a group must use one example")
    if len({request.split for request in group}) > 1:
        raise ValueError("all rollout requests in a group must use one split")


def _zero_outcome(declared: tuple[str, ...], reason: str) -> RolloutOutcome:
    return RolloutOutcome(rewards=dict.fromkeys(declared, 0.0), termination_reason=reason)


def _check_reward_shape(
    rollout_id: str, rewards: Mapping[str, object], declared: tuple[str, ...]
) -> None:
    missing = sorted(set(declared) - set(rewards))
    unknown = sorted(set(rewards) - set(declared))
    if missing or unknown:
        raise RewardShapeError(
            f"rollout {rollout_id!r} has the wrong reward shape: "
            f"missing={missing}, unknown={unknown}"
        )


def _merge_group_rewards(
    owner: object,
    finished: Sequence[RolloutAttempt],
    group_rewards: object,
    declared: tuple[str, ...],
) -> dict[str, dict[str, float]]:
    if group_rewards is not None:
        if not isinstance(group_rewards, Mapping):
            raise TypeError("compute_group_rewards must return a mapping or None")
        if any(not isinstance(key, str) for key in group_rewards):
            raise TypeError("compute_group_rewards keys must be rollout ID strings")
        ids = {attempt.rollout_id for attempt in finished}
        missing = sorted(ids - set(group_rewards))
        unknown = sorted(set(group_rewards) - ids)
        if missing or unknown:
            raise ValueError(
                "compute_group_rewards returned misaligned rollout IDs: "
                f"missing={missing}, unknown={unknown}"
            )
    merged_by_id: dict[str, dict[str, float]] = {}
    for attempt in finished:
        rollout_id = attempt.rollout_id
        individual = dict(attempt.rewards or {})
        group = {} if group_rewards is None else group_rewards[rollout_id]
        if not isinstance(group, Mapping):
            raise TypeError("compute_group_rewards values must be reward mappings")
        duplicates = sorted(set(individual) & set(group))
        if duplicates:
            raise ValueError(
                "individual and group rewards contain duplicate keys for rollout "
                f"{rollout_id!r}: {duplicates}"
            )
        merged = {**individual, **group}
        if not merged:
            raise ValueError(
                f"rollout {rollout_id!r} has no rewards; "
                "implement compute_reward or compute_group_rewards"
            )
        try:
            _check_reward_shape(rollout_id, merged, declared)
        except RewardShapeError as error:
            if not group:  # every reward came from compute_reward: name it, not the group
                blame_hook(error, owner, "compute_reward")
            raise
        merged_by_id[rollout_id] = merged
    return merged_by_id


def _check_finite_group_rewards(merged: Mapping[str, Mapping[str, object]]) -> None:
    """Raise ``ValueError`` naming the rollout, key and value when a merged map whose
    values are all numeric holds a non-finite one (a group-hook defect; non-numeric
    values stay contract errors, raised when the outcome is built)."""
    for rollout_id, rewards in merged.items():
        values = rewards.values()
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            continue
        for key, value in rewards.items():
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(
                    "compute_group_rewards returned a non-finite value for rollout "
                    f"{rollout_id!r}: reward {key!r} is {value!r}"
                )
