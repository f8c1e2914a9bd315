"""Ctrl-C stops `benchmax run --ray` and its workers, keeps every finished group, and resumes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest
from click.testing import CliRunner
from tests.cli.conftest import REPO, SAMPLE_ENVS, interruptible
from tests.runner.sample_envs import write_answer_data

from benchmax.cli import cli
from benchmax.results import read_results

pytestmark = pytest.mark.ray

POLICY = REPO / "tests" / "cli" / "paced_policy.py"
EXAMPLES, GROUP_SIZE = 40, 2


def run_args(data: Path, output: Path, *extra: str) -> list[str]:
    return [
        "run", f"{SAMPLE_ENVS}:AnswerEnv", "--data", str(data), "-k", str(GROUP_SIZE),
        "--mock-policy", f"{POLICY}:paced", "-o", str(output), *extra,
    ]  # fmt: skip


def saved(output: Path) -> list[dict]:
    if not output.exists():
        return []
    return [json.loads(line) for line in output.read_text().splitlines()[1:] if line.endswith("}")]


def group_workers() -> list[int]:
    """Process ids of live Ray worker actors of benchmax (their title is ``ray::_GroupWorker``)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            title = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if entry.name.isdigit() and title.startswith(b"ray::_GroupWorker"):
            found.append(int(entry.name))
    return found


def outcomes(path: Path) -> dict[tuple[int, int], tuple[str, dict]]:
    return {
        (r.example_index, r.group_index): (r.termination_reason, r.rewards)
        for r in read_results(path).rollouts
    }


def test_ctrl_c_keeps_finished_groups_and_the_run_resumes(
    tmp_path: Path, ray_cluster: ModuleType
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    write_answer_data(data, count=EXAMPLES)
    reference = tmp_path / "reference.jsonl"
    result = CliRunner().invoke(cli, run_args(data, reference))
    assert result.exit_code == 0, result.output

    output = tmp_path / "run.jsonl"
    ray_options = ["--ray", "--ray-workers", "2", "--ray-worker-concurrency", "1"]
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmax.cli", *run_args(data, output, *ray_options)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=interruptible,
    )
    try:
        deadline = time.monotonic() + 240  # a local Ray instance starts first
        while len(saved(output)) < 2 * GROUP_SIZE:
            if len(saved(output)) and not group_workers():
                pytest.fail("workers write groups but no ray::_GroupWorker process is seen")
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the Ray run made no progress"
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        _stdout, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, stderr
    assert "interrupted:" in stderr and f"-o {output}" in stderr
    deadline = time.monotonic() + 60
    while group_workers():  # the interrupted run's workers stop (with its Ray instance)
        assert time.monotonic() < deadline, group_workers()
        time.sleep(0.2)

    per_group = Counter(record["example_index"] for record in saved(output))
    assert set(per_group.values()) == {GROUP_SIZE}  # groups are written whole
    assert 2 <= len(per_group) < EXAMPLES

    resumed = CliRunner().invoke(cli, run_args(data, output, *ray_options))
    assert resumed.exit_code == 0, resumed.output
    assert f"({len(per_group)} resumed)" in resumed.output
    assert outcomes(output) == outcomes(reference)
    attempts = {r.example_index: r.attempt for r in read_results(output).rollouts}
    assert all(attempts[index] == 1 for index in per_group)
