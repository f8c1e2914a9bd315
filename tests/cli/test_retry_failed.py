"""Issue 38 items 1-3: failed evaluation work is retryable (``run --retry-failed``, model
calls retried after transient failures by default and counted), an untrustworthy run says
so (exit 4, one last line), and scoring failures point to ``benchmax rescore``."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from click.testing import Result
from tests.cli.conftest import SAMPLE_ENVS

from benchmax.results import (
    compare_files,
    read_results,
    read_results_summary,
    write_html_report,
)
from benchmax.testing import Fault

ANSWER_ENV = f"{SAMPLE_ENVS}:AnswerEnv"


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()[1:]]


def report_of(output: Path) -> dict[str, Any]:
    return json.loads(output.with_name(output.stem + ".report.json").read_text())


def last_line(result: Result) -> str:
    return result.output.strip().splitlines()[-1]


def test_an_outage_is_retried_with_retry_failed_and_every_reader_takes_the_new_attempt(
    invoke: Callable[..., Result],
    threaded_server: Callable[..., Any],
    answer_data: Path,
    tmp_path: Path,
) -> None:
    output = tmp_path / "o.jsonl"
    with threaded_server() as server:
        run = [
            "run", ANSWER_ENV, "--data", answer_data, "-k", "1", "--concurrency", "1",
            "--base-url", server.base_url, "--model", "m", "-o", output,
        ]  # fmt: skip
        server.inject(Fault.status(503), times=4)  # the model server is down for 4 calls
        first = invoke(*run, "--model-retries", "0", "--max-failure-share", "1")
        assert first.exit_code == 4, first.output
        line = last_line(first)
        assert line.startswith("Error: untrustworthy: 4 of 6 rollouts (67%) failed"), line
        assert "--fail-on-error 0.1" in line and "--retry-failed" in line
        assert report_of(output)["rollouts_by_reason"] == {"model_error": 4, "finished": 2}

        # A plain resume counts the failed groups as complete: nothing runs, still exit 4.
        again = invoke(*run)
        assert again.exit_code == 4, again.output
        assert report_of(output)["rollouts_run"] == 0
        # --fail-on-error 1 accepts the same results.
        assert invoke(*run, "--fail-on-error", "1").exit_code == 0

        # --retry-failed (model_retries back at its default: not a different run) runs
        # exactly the four failed groups again, under attempt 2.
        before = tmp_path / "before.jsonl"
        before.write_bytes(output.read_bytes())
        retried = invoke(*run, "--retry-failed")
        assert retried.exit_code == 0, retried.output
        report = report_of(output)
        done = invoke(*run, "--retry-failed")  # nothing failed is left: nothing runs
        assert done.exit_code == 0, done.output
        assert report_of(output)["rollouts_run"] == 0
    assert report["groups_retried"] == 4 and report["rollouts_run"] == 4
    assert report["rollouts_by_reason"] == {"finished": 6}
    assert "4 failed group(s) run again (--retry-failed)" in retried.output
    written = lines(output)
    assert [r["attempt"] for r in written].count(1) == 6  # the old attempts are kept
    failed_indexes = {r["example_index"] for r in written if r["termination_reason"] != "finished"}
    assert {r["example_index"] for r in written if r["attempt"] == 2} == failed_indexes
    # every reader takes each example's highest complete attempt
    for results in (read_results(output), read_results_summary(output)):
        assert len(results.rollouts) == 6
        assert {r.termination_reason for r in results.rollouts} == {"finished"}
    assert report["reward_stats"]["correct"]["mean"] == 0.5  # as a run with no outage
    # compare (and its pass@k) and view read the same groups
    [correct] = compare_files(before, output).keys
    assert correct.examples == 6 and correct.mean_b == 0.5
    assert correct.pass_b is not None and correct.pass_b.pass_at_1 == 0.5
    page = write_html_report(output, tmp_path / "page.html")
    assert page.groups == 6 and page.rollouts == 6


def test_transient_failures_are_retried_by_default_and_counted(
    invoke: Callable[..., Result],
    threaded_server: Callable[..., Any],
    answer_data: Path,
    tmp_path: Path,
) -> None:
    output = tmp_path / "o.jsonl"
    with threaded_server() as server:
        server.inject(Fault.status(429, retry_after=0))
        server.inject(Fault.drop())  # a reset connection
        server.inject(Fault.status(502))
        result = invoke(
            "run", ANSWER_ENV, "--data", answer_data, "-n", "1", "-k", "1",
            "--base-url", server.base_url, "--model", "m", "-o", output,
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = report_of(output)
    assert report["rollouts_by_reason"] == {"finished": 1}
    assert report["model_call_retries"] == 3
    assert "retries: 3 model call(s) retried" in " ".join(result.output.split())
    header = json.loads(output.read_text().splitlines()[0])
    assert header["definition"]["limits"]["model_retries"] == 3


def test_retries_stay_bounded_and_model_retries_0_turns_them_off(
    invoke: Callable[..., Result],
    threaded_server: Callable[..., Any],
    answer_data: Path,
    tmp_path: Path,
) -> None:
    with threaded_server() as server:
        server.inject(Fault.status(429, retry_after=0), times=None)
        bounded = invoke(
            "run", ANSWER_ENV, "--data", answer_data, "-n", "1", "-k", "1",
            "--base-url", server.base_url, "--model", "m", "-o", tmp_path / "a.jsonl",
        )  # fmt: skip
        assert (
            sum(r.method == "POST" for r in server.requests_for("")) == 4
        )  # the call and 3 retries, no more
        off = invoke(
            "run", ANSWER_ENV, "--data", answer_data, "-n", "1", "-k", "1", "--model-retries",
            "0", "--base-url", server.base_url, "--model", "m", "-o", tmp_path / "b.jsonl",
        )  # fmt: skip
        assert sum(r.method == "POST" for r in server.requests_for("")) == 5
    assert bounded.exit_code == 1 and off.exit_code == 1  # every rollout failed
    assert report_of(tmp_path / "a.jsonl")["model_call_retries"] == 3
    assert report_of(tmp_path / "b.jsonl")["model_call_retries"] == 0


def test_retry_failed_needs_a_results_file(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path
) -> None:
    no_file = invoke("run", ANSWER_ENV, "--data", answer_data, "--retry-failed")
    assert no_file.exit_code == 2 and "add -o FILE" in no_file.output
    missing = invoke(
        "run", ANSWER_ENV, "--data", answer_data, "--retry-failed", "-o", tmp_path / "x.jsonl"
    )
    assert missing.exit_code == 3 and "no results file at" in missing.output


REWARD_BUG = """
from tests.runner.sample_envs import AnswerEnv


class BuggyEnv(AnswerEnv):
    async def compute_reward(self, rollout):
        raise ValueError("the grader has a bug")
"""


def test_scoring_failures_point_to_rescore_not_to_force(
    invoke: Callable[..., Result], answer_data: Path, tmp_path: Path
) -> None:
    env_file = tmp_path / "buggy_env.py"
    env_file.write_text(REWARD_BUG)
    output = tmp_path / "o.jsonl"
    run = [
        "run",
        f"{env_file}:BuggyEnv",
        "--data",
        answer_data,
        "-k",
        "4",
        "--concurrency",
        "1",
        "-o",
        output,
    ]
    stopped = invoke(*run)
    assert stopped.exit_code == 3, stopped.output
    error = [line for line in stopped.output.splitlines() if line.strip()][-4:]
    assert error[0] == "Error: stopped early: 20 of 20 rollouts (100%) ended reward_error"
    assert error[1].startswith("  e.g. rollout ") and "buggy_env.py:7 in compute_reward" in error[1]
    assert "'benchmax rescore RESULTS' scores the saved transcripts again" in error[2]
    # The reward bug is fixed: the source changed, and the refusal names rescore.
    env_file.write_text(
        REWARD_BUG.replace('raise ValueError("the grader has a bug")', "return {'correct': 1.0}")
    )
    sys.modules.pop("buggy_env", None)  # as a new process would, import the fixed code
    refused = invoke(*run)
    assert refused.exit_code == 3
    assert f"'benchmax rescore {output}' scores them again" in refused.output
    assert "20 rollout(s) whose scoring failed" in refused.output, refused.output
    forced = invoke(*run, "--force", "--max-failure-share", "1")  # runs the last group only
    assert forced.exit_code == 4, forced.output
    text = " ".join(forced.output.split())
    assert f"'benchmax rescore {output}' scores the 20 rollouts whose scoring failed again" in text
