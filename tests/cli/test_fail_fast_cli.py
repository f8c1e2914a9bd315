"""Issue 19 kind 7 through ``benchmax run``: the judge check (``--no-judge-check``), the
failure-share stop (``--max-failure-share``) and a non-zero exit when every rollout failed."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

from click.testing import Result
from tests.cli.conftest import sample_envs_importable

from benchmax.results import read_results

JUDGED_ENV = """
from benchmax.auth import StaticBearerAuth
from benchmax.rewards import Judge
from sample_envs import AnswerEnv


class Env(AnswerEnv):
    grader = Judge("grader", "{url}", StaticBearerAuth("judge-key-0123456789"), max_retries=0)

    async def compute_reward(self, rollout):
        parsed, _ = await self.grader.request_json("grade", request_id=rollout.rollout_id)
        return {{"correct": float(parsed["score"])}}
"""

UNDECLARED_ENV = """
from sample_envs import AnswerEnv


class Env(AnswerEnv):
    async def compute_reward(self, rollout):
        return {"corect": 1.0}
"""


def env_file(tmp_path: Path, source: str) -> str:
    sample_envs_importable()
    path = tmp_path / "fail_fast_env.py"
    path.write_text(source, encoding="utf-8")
    return f"{path}:Env"


def closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/v1"


def error_lines(result: Result) -> list[str]:
    return [line for line in result.output.splitlines() if line.startswith("Error:")]


def test_an_unreachable_judge_stops_the_run_with_one_line(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path
) -> None:
    target = env_file(tmp_path, JUDGED_ENV.format(url=closed_port_url()))
    output = tmp_path / "o.jsonl"
    result = invoke("run", target, "--data", answer_data, "-o", output)
    assert result.exit_code == 3, result.output
    [line] = error_lines(result)
    assert line.startswith("Error: judge check: cannot reach the judge 'grader' at http://127")
    assert "--no-judge-check" in line
    assert "Traceback" not in result.output
    assert not output.exists()


def test_no_judge_check_runs_and_every_rollout_failing_exits_non_zero(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path
) -> None:
    target = env_file(tmp_path, JUDGED_ENV.format(url=closed_port_url()))
    output = tmp_path / "o.jsonl"
    result = invoke(
        "run", target, "--data", answer_data, "-n", "2", "-o", output, "--no-judge-check"
    )
    assert result.exit_code == 1, result.output
    assert error_lines(result) == [
        "Error: every rollout failed (8 judge_error): the rewards above are all zeros"
    ]
    assert "judge_error, e.g. rollout" in result.output  # the summary was printed first
    assert len(read_results(output).rollouts) == 8


def test_a_reachable_judge_on_the_mock_passes_the_check(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path
) -> None:
    source = (
        JUDGED_ENV.replace('"{url}"', "url")
        .replace(
            "class Env(AnswerEnv):\n    grader = Judge(",
            "class Env(AnswerEnv):\n    def __init__(self, url):\n        super().__init__()\n"
            "        self.grader = Judge(",
        )
        .replace("max_retries=0)\n", "max_retries=0)\n\n", 1)
    )
    target = env_file(tmp_path, source)
    result = invoke(
        "run", target, "--data", answer_data, "-n", "1", "-k", "1",
        "--env-arg", "url=@mock", "-o", tmp_path / "o.jsonl",
    )  # fmt: skip
    # the mock's echo policy is no judge: the check passes, the judge calls then fail
    assert "judge check" not in result.output, result.output
    assert error_lines(result) == [
        "Error: every rollout failed (1 judge_error): the rewards above are all zeros"
    ]


def test_undeclared_reward_keys_stop_the_run_early_keeping_finished_groups(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path
) -> None:
    target = env_file(tmp_path, UNDECLARED_ENV)
    output = tmp_path / "o.jsonl"
    result = invoke("run", target, "--data", answer_data, "--concurrency", "1", "-o", output)
    assert result.exit_code == 3, result.output
    [line] = error_lines(result)
    # one short line, then the detail: an example naming compute_reward, and what to do
    assert line == "Error: stopped early: 20 of 20 rollouts (100%) ended group_reward_error"
    example, remedy, keep = result.output.splitlines()[-3:]
    assert example.startswith("  e.g. rollout ") and "unknown=['corect']" in example
    assert "raised by Env.compute_reward" in example
    assert "benchmax rescore" in remedy and "--max-failure-share 1" in keep
    assert len(read_results(output).rollouts) == 20  # five groups of four kept
    # --max-failure-share 1: the same command resumes and finishes (still all failed)
    again = invoke(
        "run",
        target,
        "--data",
        answer_data,
        "--concurrency",
        "1",
        "-o",
        output,
        "--max-failure-share",
        "1",
    )
    assert again.exit_code == 1
    assert error_lines(again) == [
        "Error: every rollout failed (24 group_reward_error): the rewards above are all zeros"
    ]


def test_a_run_where_some_rollouts_finish_exits_zero(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path
) -> None:
    sample_envs_importable()
    from tests.cli.conftest import SAMPLE_ENVS

    result = invoke(
        "run", f"{SAMPLE_ENVS}:AnswerEnv", "--data", answer_data, "-o", tmp_path / "o.jsonl"
    )
    assert result.exit_code == 0, result.output
    assert error_lines(result) == []
