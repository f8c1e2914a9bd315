"""Checks that run the environment: tool schemas, rollout groups and reward variance."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from benchmax._group_pipeline import Group, GroupPipeline
from benchmax.auth import ModelAuth, StaticBearerAuth
from benchmax.envs.base import BaseEnv
from benchmax.envs.environment import Environment
from benchmax.envs.shared_types import (
    CONTENT_FILTER,
    GROUP_REWARD_ERROR,
    JUDGE_ERROR,
    MODEL_ERROR,
    MODEL_TIMEOUT,
    REWARD_ERROR,
    REWARD_TIMEOUT,
    ROLLOUT_TIMEOUT,
    SETUP_ERROR,
    SIMULATED_USER_ERROR,
    TOOL_ERROR,
    TOOL_TIMEOUT,
    DatasetSplit,
    Example,
    RewardShapeError,
    RolloutOutcome,
    RolloutRequest,
)
from benchmax.validation._shapes import tool_problems
from benchmax.validation._state import Split, Validation, error_text, listed

__all__ = ["MOCK_KEY", "check_rollouts", "check_tools"]

MOCK_KEY = "benchmax-validate-placeholder"
_OPERATIONAL_FAILURES = frozenset(
    {
        MODEL_ERROR,
        MODEL_TIMEOUT,
        TOOL_ERROR,
        TOOL_TIMEOUT,
        ROLLOUT_TIMEOUT,
        REWARD_ERROR,
        REWARD_TIMEOUT,
        GROUP_REWARD_ERROR,
        JUDGE_ERROR,
        CONTENT_FILTER,
        SETUP_ERROR,
        SIMULATED_USER_ERROR,
    }
)


async def check_tools(validation: Validation, env: Environment[Any, Any]) -> None:
    if not isinstance(env, BaseEnv):
        validation.add("tools", "skipped", "not a BaseEnv: tools are the environment's own affair")
        return
    try:
        tools = await env.list_tools()
    except Exception as error:
        validation.add("tools", "failed", f"list_tools() raised {error_text(error)}")
        return
    problems = tool_problems(tools)
    if problems:
        validation.add("tools", "failed", listed(problems))
    else:
        names = [tool["function"]["name"] for tool in tools]
        validation.add("tools", "passed", f"{len(names)} tools: {', '.join(names) or 'none'}")


def _providers(validation: Validation) -> dict[str, ModelAuth]:
    return dict(validation.config.auth_providers)


def _request(
    validation: Validation, rollout_id: str, example: Example[object], split: DatasetSplit
) -> RolloutRequest[object]:
    config = validation.config
    if config.uses_mock:
        base_url = validation.mock.session_url(rollout_id)
        auth: ModelAuth = StaticBearerAuth(MOCK_KEY)
    else:
        assert config.base_url is not None
        base_url = config.base_url.replace("{rollout_id}", rollout_id)
        auth = config.model_auth
    return RolloutRequest(
        rollout_id=rollout_id,
        example=example,
        model=config.model,
        base_url=base_url,
        model_auth=auth,
        split=split,
    )


async def check_rollouts(
    validation: Validation, env: Environment[Any, Any], split: Split, keys: tuple[str, ...]
) -> None:
    config = validation.config
    where = "the embedded mock model" if config.uses_mock else config.base_url
    chosen = split.examples[: config.examples]
    groups: list[list[RolloutOutcome]] = []
    start = len(validation.logs.records)
    pipeline = GroupPipeline(
        env,
        auth_providers=_providers(validation),
        pass_on_logs=True,
        hook_deadlines=config.rollout_hook_deadlines(),
    )
    try:
        async with asyncio.timeout(config.rollout_timeout):
            for index, example in enumerate(chosen):
                requests = tuple(
                    _request(validation, f"validate.e{index}.r{k}", example, split.name)
                    for k in range(config.group_size)
                )
                by_id = (await pipeline.run(Group(requests))).outcomes
                groups.append([by_id[r.rollout_id] for r in requests])
    except TimeoutError:
        errors = validation.logs.errors_since(start)
        why = f"; first error: {errors[0][:400]}" if errors else ""
        validation.add(
            "rollouts",
            "failed",
            f"the rollouts did not finish within {config.rollout_timeout:g} s against "
            f"{where}: check the endpoint, or set model_timeout/rollout_timeout on the env"
            f"{why}",
        )
        return
    except RewardShapeError as error:
        validation.add("rollouts", "failed", _shape_mismatch(error, keys))
        return
    except Exception as error:
        validation.add(
            "rollouts",
            "failed",
            f"run_group raised {error_text(error)}: a contract error (reward shape, "
            "payload or hook result); fix the environment code it names",
        )
        return
    shape = _logged_shape_mismatch(validation, start)
    if shape is not None:  # settled as group_reward_error, but the cause is the declaration
        validation.add("rollouts", "failed", _shape_mismatch(shape, keys))
        return
    outcomes = [outcome for group in groups for outcome in group]
    wrong = [o for o in outcomes if tuple(o.rewards) != keys and set(o.rewards) != set(keys)]
    if wrong:
        validation.add(
            "rollouts",
            "failed",
            f"rewards {sorted(wrong[0].rewards)} differ from reward_keys {list(keys)}",
        )
        return
    reasons = Counter(outcome.termination_reason for outcome in outcomes)
    failed = sum(n for reason, n in reasons.items() if reason in _OPERATIONAL_FAILURES)
    summary = ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items()))
    ran = f"{len(chosen)} examples x {config.group_size} rollouts against {where} ({summary})"
    errors = validation.logs.errors_since(start)
    why = f"; first error: {errors[0][:400]}" if errors else ""
    if failed == len(outcomes):
        validation.add("rollouts", "failed", f"every rollout failed: {ran}{why}")
        return
    if failed:
        validation.add("rollouts", "warning", f"some rollouts failed: {ran}{why}")
    else:
        validation.add("rollouts", "passed", ran)
    _check_variance(validation, groups)


def _logged_shape_mismatch(validation: Validation, start: int) -> RewardShapeError | None:
    """The first reward-shape mismatch logged during the rollouts, if any."""
    for record in validation.logs.records[start:]:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, RewardShapeError):
            return error
    return None


def _shape_mismatch(error: RewardShapeError, keys: tuple[str, ...]) -> str:
    return (
        f"reward shape mismatch: the rewards returned differ from reward_keys {list(keys)} "
        f"({error}); every such rollout ends group_reward_error with zero rewards: return "
        "exactly the declared keys from compute_reward and compute_group_rewards together, "
        "or declare the keys they return"
    )


def _check_variance(validation: Validation, groups: list[list[RolloutOutcome]]) -> None:
    if validation.config.group_size < 2:
        validation.add("reward variance", "skipped", "groups of one rollout cannot vary")
        return
    varied = sum(
        1 for group in groups if len({tuple(sorted(o.rewards.items())) for o in group}) > 1
    )
    if varied:
        validation.add(
            "reward variance", "passed", f"rewards vary in {varied} of {len(groups)} groups"
        )
        return
    hint = (
        " (expected with the mock's echo policy: pass --mock-policy with a policy that "
        "answers like a model, or a real --base-url)"
        if validation.config.uses_mock and validation.config.policy is None
        else ""
    )
    validation.add(
        "reward variance",
        "warning",
        f"every group's rollouts got identical rewards: a flat group carries no learning "
        f"signal for group-relative training{hint}",
    )
