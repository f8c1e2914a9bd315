"""beyond.md §9 / issue 19 kind 7: a misconfigured run stops early instead of training on zeros.

* the judge check: every distinct judge the environment will call is reached once with its
  credential before the run; a refusal (401/403) or no answer stops it with one line;
* the failure-share stop: once 20 rollouts ran, more than ``max_failure_share`` of them
  ending with one same failure stops the run (one line, reason and example), keeping the
  finished groups;
* (the CLI's exit status when every rollout failed: tests/cli/test_fail_fast_cli.py).
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from tests.envs.base.support import fixed_response_server
from tests.runner.sample_envs import NumberEnv, number_config

from benchmax.auth import InjectedAuth, StaticBearerAuth
from benchmax.envs.shared_types import RolloutAttempt, RolloutRequest
from benchmax.results import read_results
from benchmax.rewards import Judge, JudgeError
from benchmax.runner import (
    FailureShareExceeded,
    JudgeCheckError,
    RunConfig,
    RunError,
    run_environment,
)
from benchmax.testing import MockModelServer


class JudgedNumberEnv(NumberEnv):
    """NumberEnv whose rollouts ask ``judge`` for their score."""

    def __init__(self, judge: Judge, count: int = 2) -> None:
        super().__init__(count)
        self.judge = judge

    async def run_rollout(self, request: RolloutRequest[dict[str, Any]]) -> RolloutAttempt:
        parsed, _ = await self.judge.request_json("grade", request_id=request.rollout_id)
        return RolloutAttempt(
            rollout_id=request.rollout_id,
            termination_reason="finished",
            rewards={"hit": float(parsed["score"]), "value": 0.0},
        )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# -- the judge check ---------------------------------------------------------------------


@pytest.mark.parametrize("status", [401, 403])
async def test_a_judge_refusing_its_key_stops_the_run_before_it_starts(
    tmp_path: Path, status: int
) -> None:
    body = b'{"error": {"message": "Incorrect API key provided: sk-judge-key-0123456789"}}'
    async with fixed_response_server(status, body) as origin:
        judge = Judge("grader", f"{origin}/v1", StaticBearerAuth("sk-judge-key-0123456789"))
        env = JudgedNumberEnv(judge)
        with pytest.raises(JudgeCheckError) as raised:
            await run_environment(env, number_config(tmp_path))
    message = str(raised.value)
    assert "\n" not in message
    assert f"the judge 'grader' at {origin}/v1 refused its credential (HTTP {status})" in message
    assert "--no-judge-check" in message
    assert "sk-judge-key-0123456789" not in message  # the echoed key is masked
    assert isinstance(raised.value, RunError)
    assert not (tmp_path / "results.jsonl").exists()  # stopped before the run
    assert env.started == []


async def test_an_unreachable_judge_stops_the_run(tmp_path: Path) -> None:
    judge = Judge("grader", f"http://127.0.0.1:{free_port()}/v1", StaticBearerAuth("k" * 12))
    env = JudgedNumberEnv(judge)
    with pytest.raises(JudgeCheckError, match=r"judge check: cannot reach the judge 'grader'"):
        await run_environment(env, number_config(tmp_path))
    assert env.started == []


async def test_a_password_in_the_judges_url_is_masked_keeping_the_user_name(
    tmp_path: Path,
) -> None:
    port = free_port()
    url = f"http://alice:sk-url-secret-0123456789@127.0.0.1:{port}/v1"
    env = JudgedNumberEnv(Judge("grader", url, StaticBearerAuth("k" * 12)))
    with pytest.raises(JudgeCheckError) as raised:
        await run_environment(env, number_config(tmp_path))
    message = str(raised.value)
    assert f"the judge 'grader' at http://alice:***@127.0.0.1:{port}/v1:" in message
    assert "sk-url-secret-0123456789" not in message


async def test_the_check_uses_the_judges_credential_once_per_distinct_judge(
    tmp_path: Path,
) -> None:
    async with MockModelServer(lambda body: '{"score": 1}') as server:
        judge = Judge("grader", server.base_url, InjectedAuth("judge"))
        env = JudgedNumberEnv(judge)
        env.same_judge = Judge("grader", server.base_url, InjectedAuth("judge"))  # type: ignore[attr-defined]
        env.rubric_judges = {"quality": judge}  # type: ignore[attr-defined]
        config = number_config(
            tmp_path, auth_providers={"judge": StaticBearerAuth("judge-key-123456")}
        )
        report = await run_environment(env, config)
        checks = [r for r in server.requests if r.method == "GET"]
    assert [r.path for r in checks] == ["/v1/models"]  # equal judges are one, checked once
    assert checks[0].headers["authorization"] == "Bearer judge-key-123456"
    assert report.rollouts_by_reason == {"finished": 6}


async def test_a_simulated_user_refusing_its_key_stops_the_run_too(tmp_path: Path) -> None:
    from benchmax.tools import SimulatedUser

    async with fixed_response_server(401, b'{"error": "bad key"}') as origin:
        env = NumberEnv(2)
        env.user = SimulatedUser(  # type: ignore[attr-defined]
            model="customer", base_url=f"{origin}/v1", auth=StaticBearerAuth("sk-user-key-0123")
        )
        with pytest.raises(JudgeCheckError) as raised:
            await run_environment(env, number_config(tmp_path))
    message = str(raised.value)
    assert f"the simulated user 'customer' at {origin}/v1 refused its credential" in message
    assert "sk-user-key-0123" not in message
    assert env.started == []


async def test_declared_judges_are_checked_too(tmp_path: Path) -> None:
    async with fixed_response_server(401, b"{}") as origin:
        declared = Judge("other", f"{origin}/v1", StaticBearerAuth("k" * 12))
        with pytest.raises(JudgeCheckError, match="the judge 'other'"):
            await run_environment(NumberEnv(2), number_config(tmp_path, judges=(declared,)))


async def test_a_server_without_a_model_list_counts_as_reached(tmp_path: Path) -> None:
    async with fixed_response_server(404, b'{"error": "no such route"}') as origin:
        judge = Judge("grader", f"{origin}/v1", StaticBearerAuth("k" * 12), max_retries=0)
        config = number_config(tmp_path, max_failure_share=1)
        report = await run_environment(JudgedNumberEnv(judge), config)
    assert report.rollouts_by_reason == {"judge_error": 6}  # the run went ahead


async def test_judge_check_false_skips_the_check(tmp_path: Path) -> None:
    judge = Judge("grader", f"http://127.0.0.1:{free_port()}/v1", StaticBearerAuth("k" * 12))
    config = number_config(tmp_path, judge_check=False, max_failure_share=1)
    report = await run_environment(JudgedNumberEnv(judge), config)
    assert report.rollouts_by_reason == {"judge_error": 6}
    assert JudgeError  # the rollouts settled as judge errors


# -- the failure-share stop --------------------------------------------------------------


class UndeclaredKeysEnv(NumberEnv):
    """Every rollout returns a reward key the environment does not declare."""

    async def run_rollout(self, request: RolloutRequest[dict[str, Any]]) -> RolloutAttempt:
        return RolloutAttempt(
            rollout_id=request.rollout_id, termination_reason="finished", rewards={"hti": 1.0}
        )

    async def compute_group_rewards(self, rollouts: Any) -> Any:
        return None


def undeclared_config(tmp_path: Path, **changes: Any) -> RunConfig:
    return number_config(tmp_path, group_size=4, max_concurrent_groups=1, **changes)


async def test_most_rollouts_failing_the_same_way_stop_the_run_keeping_finished_groups(
    tmp_path: Path,
) -> None:
    env = UndeclaredKeysEnv(10)
    with pytest.raises(FailureShareExceeded) as raised:
        await run_environment(env, undeclared_config(tmp_path))
    message = str(raised.value)
    assert message == "stopped early: 20 of 20 rollouts (100%) ended group_reward_error"
    example, remedy, keep = raised.value.detail
    assert example.startswith("e.g. rollout ")
    assert "wrong reward shape: missing=['hit', 'value'], unknown=['hti']" in example
    assert "rescore" in remedy
    assert "--max-failure-share 1" in keep
    kept = read_results(tmp_path / "results.jsonl")
    assert len(kept.rollouts) == 20  # five finished groups kept
    # the same run resumes with the stop turned off, and finishes the other five groups
    report = await run_environment(env, undeclared_config(tmp_path, max_failure_share=1))
    assert report.groups == 10 and report.groups_resumed == 5


async def test_a_share_of_one_never_stops(tmp_path: Path) -> None:
    report = await run_environment(
        UndeclaredKeysEnv(10), undeclared_config(tmp_path, max_failure_share=1)
    )
    assert report.rollouts_by_reason == {"group_reward_error": 40}


async def test_no_stop_before_the_minimum_number_of_rollouts(tmp_path: Path) -> None:
    report = await run_environment(UndeclaredKeysEnv(4), undeclared_config(tmp_path))
    assert report.rollouts_by_reason == {"group_reward_error": 16}  # 16 < 20: no stop


async def test_task_outcomes_and_scattered_failures_do_not_stop_the_run(tmp_path: Path) -> None:
    env = NumberEnv(12)
    env.payloads = [{"value": n, "fail": "max_turns_exceeded"} for n in range(6)] + [
        {"value": n, "fail": f"tool_error_{n}"} for n in range(6)
    ]
    report = await run_environment(env, number_config(tmp_path, max_concurrent_groups=1))
    assert report.groups == 12  # 6 budget limits (not failures), 6 different failures


async def test_a_share_of_zero_stops_at_the_first_failure_after_the_minimum(
    tmp_path: Path,
) -> None:
    env = NumberEnv(12)
    env.payloads = [{"value": n} for n in range(7)] + [{"value": 7, "fail": "tool_error"}] * 5
    with pytest.raises(FailureShareExceeded, match="1 of 24 rollouts"):
        await run_environment(
            env, number_config(tmp_path, max_concurrent_groups=1, max_failure_share=0)
        )


@pytest.mark.parametrize("share", [-0.1, 1.5, float("nan"), True, "0.5"])
def test_max_failure_share_is_validated(share: Any) -> None:
    with pytest.raises((ValueError, TypeError)):
        RunConfig(model="m", base_url="http://x/v1", max_failure_share=share)


def test_the_checks_stay_out_of_the_run_definition(tmp_path: Path) -> None:
    from benchmax.runner import run_definition

    plain = run_definition(NumberEnv(1), number_config(tmp_path))
    changed = run_definition(
        NumberEnv(1), number_config(tmp_path, judge_check=False, max_failure_share=1)
    )
    assert json.dumps(plain.fields, sort_keys=True) == json.dumps(changed.fields, sort_keys=True)
