"""``RunConfig(retry_failed=True)``: the groups whose latest attempt failed operationally run
again under the next attempt; scoring failures (``benchmax rescore``'s work), budget ends and
finished groups do not; readers take the latest attempt."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.runner.sample_envs import NumberEnv, number_config

from benchmax.results import read_results
from benchmax.runner import run_environment
from benchmax.runner._failure_share import is_retryable_failure
from benchmax.runner._rescore import RESCORED_REASONS

FAILS = ["tool_error", "reward_error", "max_turns_exceeded", "model_timeout", "judge_error"]


def env_with_failures() -> NumberEnv:
    env = NumberEnv(6)
    env.payloads = [{"value": 0}] + [{"value": n, "fail": f} for n, f in enumerate(FAILS, 1)]
    return env


async def test_only_operationally_failed_groups_run_again(tmp_path: Path) -> None:
    config = number_config(tmp_path, max_failure_share=1)
    first = await run_environment(env_with_failures(), config)
    assert first.groups_retried == 0
    again = await run_environment(env_with_failures(), config)  # a plain resume
    assert again.rollouts_run == 0
    retried = await run_environment(env_with_failures(), number_config(
        tmp_path, max_failure_share=1, retry_failed=True
    ))  # fmt: skip
    assert retried.groups_retried == 2  # tool_error and model_timeout
    assert retried.rollouts_run == 6 and retried.groups_resumed == 4
    lines = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    second = {r["example_index"] for r in lines[1:] if r["attempt"] == 2}
    assert second == {1, 4}
    kept = read_results(tmp_path / "results.jsonl")
    assert len(kept.rollouts) == 18
    assert {r.attempt for r in kept.rollouts if r.example_index in (1, 4)} == {2}


@pytest.mark.parametrize("reason", sorted(RESCORED_REASONS))
def test_what_rescore_fixes_is_not_retried(reason: str) -> None:
    assert not is_retryable_failure(reason)


@pytest.mark.parametrize(
    "reason",
    [
        "model_error",
        "model_timeout",
        "rollout_timeout",
        "setup_error",
        "tool_timeout",
        "environment_error",
    ],
)
def test_operational_failures_are_retried(reason: str) -> None:
    assert is_retryable_failure(reason)


def test_retry_failed_is_validated() -> None:
    with pytest.raises(TypeError, match="retry_failed must be True or False"):
        number_config(Path("."), retry_failed="yes")
