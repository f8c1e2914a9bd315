"""A Ray worker whose event loop a tool blocks past the rollout deadline is replaced and the
group settled as ``rollout_timeout``, so the run ends with every group in the results file."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest
from click.testing import CliRunner
from tests.runner.sample_envs import write_answer_data

from benchmax.cli import cli
from benchmax.results import read_results

pytestmark = pytest.mark.ray

STALLING = Path(__file__).with_name("stalling_env.py")
EXAMPLES, GROUP_SIZE = 6, 2


def test_a_worker_a_tool_blocks_is_replaced_and_the_run_ends_complete(
    tmp_path: Path, ray_cluster: ModuleType
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    write_answer_data(data, count=EXAMPLES)
    output = tmp_path / "run.jsonl"
    args = [
        "run", f"{STALLING}:StallingEnv", "--data", str(data), "-k", str(GROUP_SIZE),
        "--mock-policy", "tool_exerciser", "--rollout-timeout", "1", "-o", str(output),
        "--ray", "--ray-workers", "2", "--ray-worker-concurrency", "2",
        "--fail-on-error", "1",  # the blocked group's rollouts time out: the run still ends
    ]  # fmt: skip
    began = time.monotonic()
    result = CliRunner().invoke(cli, args)
    seconds = time.monotonic() - began
    assert result.exit_code == 0, result.output
    # The tool sleeps 600 s; the worker is replaced 1 s (rollout timeout) + 5 s (blocked
    # limit) after the group was sent, plus a worker's start.
    assert seconds < 90, seconds

    lines = [json.loads(line) for line in output.read_text().splitlines()[1:]]
    assert Counter(r["example_index"] for r in lines) == dict.fromkeys(range(EXAMPLES), GROUP_SIZE)
    stuck = [r for r in lines if r["example_index"] == 1]
    assert {r["termination_reason"] for r in stuck} == {"rollout_timeout"}
    assert all(r["rewards"] == {"correct": 0.0} and r["attempt"] == 1 for r in stuck)
    message = stuck[0]["logs"][0]["message"]
    assert "event loop was blocked for" in message
    assert "by StallingEnv.run_tool (" in message  # the bundle names its source <dynamic-code>
    others = [r for r in lines if r["example_index"] != 1]
    assert {r["termination_reason"] for r in others} == {"finished"}
    assert len(read_results(output).rollouts) == EXAMPLES * GROUP_SIZE
    report = json.loads(output.with_name("run.report.json").read_text())
    assert report["rollouts_by_reason"] == {"finished": 10, "rollout_timeout": 2}
