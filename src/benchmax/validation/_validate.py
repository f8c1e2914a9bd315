"""``validate_environment``: every check an environment should pass before a training run."""

from __future__ import annotations

import contextlib
from typing import Any

from benchmax.envs.environment import Environment
from benchmax.envs.shared_types import DatasetSplit
from benchmax.testing import MockModelServer, echo
from benchmax.validation._bundle_check import check_bundle
from benchmax.validation._config import ValidationConfig
from benchmax.validation._dataset_checks import check_split
from benchmax.validation._environment_checks import (
    check_class,
    check_dependencies,
    check_reward_keys,
    construct,
)
from benchmax.validation._report import ValidationReport
from benchmax.validation._rollout_checks import check_rollouts, check_tools
from benchmax.validation._state import Validation, capturing_logs

__all__ = ["validate_environment"]

_SPLITS: tuple[DatasetSplit, ...] = ("train", "eval")


async def validate_environment(
    env_class: type[Environment[Any, Any]],
    config: ValidationConfig | None = None,
    *,
    target: str | None = None,
) -> ValidationReport:
    """Run every check on ``env_class`` and return the report (never raises for a bad env).

    Checks, in order: the class is a concrete ``Environment``; the constructor accepts
    ``config.constructor_args``; ``reward_keys`` is declared; for each split present
    (``train``, ``eval``): the dataset loads and is non-empty, ids are unique and identical
    across two loads, payloads are JSON-serializable, and BaseEnv payloads have valid
    ``prompt_messages``; ``list_tools`` gives valid OpenAI function schemas; ``examples``
    groups of ``group_size`` rollouts run without a contract error with the declared keys;
    rewards vary within a group (a warning otherwise); the bundle dumps, survives a file
    round trip, is compatible, and runs one rollout in a fresh interpreter; its size; and
    third-party imports of the environment's source are declared (a warning otherwise).
    Later checks that need an earlier result are skipped when it failed.
    """
    config = config or ValidationConfig()
    label = (
        target
        or f"{getattr(env_class, '__module__', '?')}:{getattr(env_class, '__qualname__', '?')}"
    )
    with capturing_logs() as logs:
        # An environment that always records tokens (AgentEnv) needs a mock that gives them.
        tokens = getattr(env_class, "record_tokens", False) is True
        async with MockModelServer(config.policy or echo, record=False, tokens=tokens) as mock:
            validation = Validation(env_class, config, mock, logs)
            await _run_checks(validation)
    return ValidationReport.of(label, validation.checks)


async def _run_checks(validation: Validation) -> None:
    if not check_class(validation):
        return
    env = construct(validation)
    if env is None:
        validation.add("datasets", "skipped", "needs a constructed environment")
        return
    try:
        keys = check_reward_keys(validation, env)
        splits = [s for name in _SPLITS if (s := await check_split(validation, env, name))]
        if not splits and not any(c.name.endswith(": loads") for c in validation.checks):
            validation.add(
                "datasets",
                "failed",
                f"neither train nor eval loads from {validation.config.base_dir}: put the "
                "data files there (e.g. train.jsonl, eval.jsonl) or point --data at them",
            )
        await check_tools(validation, env)
        if keys is None or not splits:
            validation.add("rollouts", "skipped", "needs reward_keys and a split that loads")
        else:
            rollout_split = next((s for s in splits if s.name == "eval"), splits[0])
            await check_rollouts(validation, env, rollout_split, keys)
    finally:
        with contextlib.suppress(Exception):
            await env.aclose()
    split_name = splits[0].name if splits else None
    bundle_split = "eval" if any(s.name == "eval" for s in splits) else split_name
    await check_bundle(validation, bundle_split)
    check_dependencies(validation)
