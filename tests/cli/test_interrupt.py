"""Killing ``benchmax run`` mid-way (SIGINT, SIGTERM, SIGKILL), then resuming it to completion."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result
from tests.cli.conftest import REPO, SAMPLE_ENVS, interruptible
from tests.runner.sample_envs import write_answer_data

from benchmax.results import read_results

POLICY = Path(__file__).with_name("paced_policy.py")
EXAMPLES = 40
GROUP_SIZE = 2
CONCURRENCY = 2
PAUSE_AFTER_GROUPS = 4
"""The interrupted runs' policy answers this many groups' calls, then holds every later one
(``paced_policy.py``): the signal always finds the run mid-way, on any machine."""
PATIENCE_SECONDS = 120.0
"""Generous bound for a subprocess to start and make progress on a busy machine."""


def run_args(data: Path, output: Path, concurrency: int = CONCURRENCY) -> list[str]:
    return [
        "run", f"{SAMPLE_ENVS}:AnswerEnv", "--data", str(data), "-k", str(GROUP_SIZE),
        "--concurrency", str(concurrency), "--mock-policy", f"{POLICY}:paced", "-o", str(output),
    ]  # fmt: skip


def outcomes(path: Path) -> dict[tuple[int, int], tuple[str, dict]]:
    return {
        (r.example_index, r.group_index): (r.termination_reason, r.rewards)
        for r in read_results(path).rollouts
    }


def saved_lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    text = path.read_text()
    return [json.loads(line) for line in text.splitlines()[1:] if line.endswith("}")]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("data")
    write_answer_data(directory, count=EXAMPLES)
    return directory


@pytest.fixture(scope="module")
def reference(data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Outcomes of one uninterrupted run (concurrency is not part of the run definition)."""
    from click.testing import CliRunner

    from benchmax.cli import cli

    output = tmp_path_factory.mktemp("reference") / "full.jsonl"
    result: Result = CliRunner().invoke(cli, run_args(data, output, concurrency=8))
    assert result.exit_code == 0, result.output
    table = outcomes(output)
    assert len(table) == EXAMPLES * GROUP_SIZE
    return table


def start_run(data: Path, output: Path) -> subprocess.Popen[str]:
    pause = str(PAUSE_AFTER_GROUPS * GROUP_SIZE)  # AnswerEnv: one model call per rollout
    return subprocess.Popen(
        [sys.executable, "-m", "benchmax.cli", *run_args(data, output)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "BENCHMAX_TEST_PAUSE_AFTER": pause},
        preexec_fn=interruptible,
    )


def wait_for_groups(output: Path, groups: int, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + PATIENCE_SECONDS
    while len(saved_lines(output)) < groups * GROUP_SIZE:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "run made no progress"
        time.sleep(0.05)


@pytest.mark.parametrize(
    "sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["SIGINT", "SIGTERM", "SIGKILL"]
)
def test_interrupted_run_resumes_to_the_uninterrupted_result(
    sig: signal.Signals,
    data: Path,
    reference: dict,
    tmp_path: Path,
    invoke: Callable[..., Result],
) -> None:
    output = tmp_path / "run.jsonl"
    process = start_run(data, output)
    try:
        wait_for_groups(output, PAUSE_AFTER_GROUPS, process)
        process.send_signal(sig)
        _stdout, stderr = process.communicate(timeout=PATIENCE_SECONDS)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    if sig in (signal.SIGINT, signal.SIGTERM):  # SIGTERM is handled like Ctrl-C
        assert process.returncode == 128 + sig, stderr
        assert "interrupted" in stderr and f"-o {output}" in stderr
        assert "Traceback" not in stderr
    else:
        assert process.returncode == -signal.SIGKILL

    per_group = Counter(record["example_index"] for record in saved_lines(output))
    complete = {index for index, count in per_group.items() if count == GROUP_SIZE}
    partial = set(per_group) - complete
    assert len(complete) == PAUSE_AFTER_GROUPS  # every later call was held by the policy

    assert len(partial) <= CONCURRENCY  # at most the groups in flight
    if sig != signal.SIGKILL:
        assert not partial  # groups are written whole

    resumed = invoke(*run_args(data, output, concurrency=8))
    assert resumed.exit_code == 0, resumed.output
    assert f"({len(complete)} resumed)" in resumed.output
    assert outcomes(output) == reference
    attempts = {r.example_index: r.attempt for r in read_results(output).rollouts}
    assert all(attempts[index] == 1 for index in complete)


def test_sigterm_ends_a_run_whose_event_loop_is_blocked(data: Path, tmp_path: Path) -> None:
    output = tmp_path / "run.jsonl"
    blocked = tmp_path / "blocked"
    process = subprocess.Popen(
        [
            sys.executable, "-m", "benchmax.cli", "run",
            f"{Path(__file__).with_name('blocking_env.py')}:BlockingEnv", "--data", str(data),
            "-k", "2", "--concurrency", "1", "--mock-policy", "echo", "-o", str(output),
        ],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "BENCHMAX_TEST_BLOCKED_MARKER": str(blocked)},
    )  # fmt: skip
    try:
        wait_for_groups(output, 2, process)
        deadline = time.monotonic() + PATIENCE_SECONDS
        while not blocked.exists():  # the third group's reward hook blocks the loop
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the reward hook never started blocking"
            time.sleep(0.05)
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        _stdout, stderr = process.communicate(timeout=PATIENCE_SECONDS)
        took = time.monotonic() - started
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 128 + signal.SIGTERM, stderr
    # The watchdog gives up at the latest 2 x STOP_GRACE_SECONDS (10 s) after the signal; the
    # bound is generous for a busy machine, the point is that the run ends at all.
    assert took < 60
    assert len(read_results(output).rollouts) == 4  # the finished groups are kept
