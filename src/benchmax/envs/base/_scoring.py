"""Settling a ``BaseEnv`` rollout: ``compute_reward`` within ``reward_timeout`` when it
finished, zero rewards otherwise or when scoring failed (logged).

``score_rollout`` needs only an environment's reward hooks (``RewardHooks``) and the kind of
rollout to make, so a rescore settles stored transcripts through it exactly as a run does."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any, cast

from benchmax._cancellation import stray_cancellation_as_error
from benchmax._hook_deadlines import deadline_for
from benchmax.envs._hook_errors import NotAsyncHook, exits_as_errors, hook_errors, must_await
from benchmax.envs.base._meter import Meter, timed
from benchmax.envs.base._rollout_hooks import RewardHooks, RolloutFactory, hook_name
from benchmax.envs.base._rollout_start import Transcript
from benchmax.envs.base.dataset import JsonRow
from benchmax.envs.base.openai_types import Messages
from benchmax.envs.shared_types import (
    FINISHED,
    REWARD_ERROR,
    REWARD_TIMEOUT,
    RewardMap,
    RolloutAttempt,
    RolloutFailure,
    RolloutRequest,
)

__all__ = ["score_rollout"]

logger = logging.getLogger("benchmax.envs.base.env")


async def score_rollout[R: RolloutAttempt](
    env: RewardHooks[R],
    request: RolloutRequest[JsonRow],
    reward_timeout: float | None,
    reason: str,
    transcript: Transcript,
    example_args: dict[str, Any],
    meter: Meter | None,
    *,
    rollout_type: RolloutFactory[R],
) -> R:
    """Settle a rollout that ended with ``reason`` as a ``rollout_type`` (``BaseRollout``):
    scored by ``compute_reward`` (within ``reward_timeout``) when it finished, else with
    zero rewards; a failing, late or non-finite reward is logged and settles it with zero
    rewards."""
    rollout_id = request.rollout_id

    def settle(termination_reason: str, rewards: RewardMap | None) -> R:
        return rollout_type(
            rollout_id=rollout_id,
            termination_reason=termination_reason,
            rewards=rewards,
            # The transcript holds prompt messages, decoded replies and tool
            # messages: plain dicts shaped as the SDK's message params.
            messages=cast(Messages, transcript),
            example_args=example_args,
            split=request.split,
        )

    def zero(termination_reason: str) -> R:
        return settle(termination_reason, dict.fromkeys(env.reward_keys, 0.0))

    if reason != FINISHED:
        return zero(reason)
    limit = deadline_for("compute_reward", reward_timeout)
    deadline = asyncio.timeout(limit.seconds)
    try:
        with timed(meter, "reward"):
            async with deadline:
                with (
                    exits_as_errors(env, "compute_reward"),
                    stray_cancellation_as_error(hook_name(env, "compute_reward")),
                ):
                    rewards = await must_await(
                        env, "compute_reward", env.compute_reward(settle(reason, None))
                    )
    except NotAsyncHook:
        raise  # a contract error: every rollout would fail the same way
    except RolloutFailure as failure:
        logger.error(
            "base.rollout.reward_failed rollout_id=%s termination_reason=%s: %s",
            rollout_id,
            failure.termination_reason,
            failure,
            exc_info=failure,
        )
        return zero(failure.termination_reason)
    except Exception as error:
        if isinstance(error, TimeoutError) and deadline.expired():
            if limit.default:
                logger.error(
                    "base.rollout.reward_failed rollout_id=%s termination_reason=%s: %s",
                    rollout_id,
                    REWARD_TIMEOUT,
                    limit.expired_message(
                        "compute_reward", error, type(env).compute_reward, "reward_timeout"
                    ),
                )
                return zero(REWARD_TIMEOUT)
            logger.error(
                "base.rollout.reward_failed rollout_id=%s termination_reason=reward_timeout: "
                "compute_reward exceeded reward_timeout of %gs",
                rollout_id,
                reward_timeout,
                exc_info=error,
            )
            return zero(REWARD_TIMEOUT)
        logger.error(
            "base.rollout.reward_failed rollout_id=%s termination_reason=reward_error: %s",
            rollout_id,
            error,
            exc_info=error,
        )
        return zero(REWARD_ERROR)
    non_finite = _non_finite_reward(rewards, env.reward_keys)
    if non_finite is not None:
        logger.error(
            "base.rollout.reward_failed rollout_id=%s termination_reason=reward_error: "
            "compute_reward returned a non-finite value for reward %r: %r",
            rollout_id,
            *non_finite,
        )
        return zero(REWARD_ERROR)
    with hook_errors(env, "compute_reward"):
        return settle(reason, rewards)


def _non_finite_reward(rewards: object, declared: Sequence[str]) -> tuple[str, float] | None:
    """The first non-finite value of a reward map that is otherwise valid for ``declared``
    keys (other defects stay contract errors), or ``None``."""
    if not isinstance(rewards, Mapping) or not rewards:
        return None
    keys = set(declared)
    found: tuple[str, float] | None = None
    for key, value in rewards.items():
        if key not in keys or isinstance(value, bool) or not isinstance(value, int | float):
            return None
        if found is None and isinstance(value, float) and not math.isfinite(value):
            found = (key, value)
    return found
