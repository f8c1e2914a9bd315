"""The agent example programs, unmodified, against the embedded mock model: each finishes,
scores, and has every sampled token in exactly one training sample, with the branches it
should have. A planted loss (a sample builder that drops a branch) fails the check."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from examples.agents.env import (
    CurlAgent,
    FanOutAgent,
    RewritingAgent,
    StreamingAgent,
    SumAgent,
    ToolLoopAgent,
)
from examples.agents.policy import policy

from benchmax.envs import Example, RolloutRequest, StaticBearerAuth
from benchmax.stitching import TokenCoverage
from benchmax.testing import MockModelServer
from benchmax.training import collect_group, to_training_samples
from benchmax.trajectory import Trajectory

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def mock() -> AsyncIterator[MockModelServer]:
    async with MockModelServer(policy, tokens=True) as server:
        yield server


async def _trajectory(env: SumAgent, server: MockModelServer) -> Trajectory:
    request: RolloutRequest[Any] = RolloutRequest(
        rollout_id="r0",
        example=Example(id="ex", payload={"a": 23, "b": 19}),
        model="mock-model",
        base_url=server.base_url,
        model_auth=StaticBearerAuth("sk-mock"),
    )
    (trajectory,) = (await collect_group(env, [request])).trajectories
    return trajectory


def trained_tokens(trajectory: Trajectory, samples: list[Any]) -> int:
    return sum(sum(sample["completion_mask"]) for sample in samples)


def coverage_check(trajectory: Trajectory, samples: list[Any]) -> TokenCoverage:
    """The coverage a trainer reports for what it was handed; fails on any loss."""
    coverage = TokenCoverage.of(
        trajectory.model_calls,
        trajectory.branches,
        trained_tokens=trained_tokens(trajectory, samples),
    )
    if coverage.lost_tokens:
        raise AssertionError(
            f"rollout {trajectory.rollout_id} lost {coverage.lost_tokens} of"
            f" {coverage.sampled_tokens} sampled tokens"
        )
    return coverage


@pytest.mark.parametrize(
    ("env_class", "calls", "branches"),
    [
        (ToolLoopAgent, 2, ["first"]),
        (StreamingAgent, 1, ["first"]),
        (RewritingAgent, 2, ["first", "history_rewritten"]),
        (FanOutAgent, 4, ["first", "history_rewritten", "history_rewritten", "history_rewritten"]),
        (CurlAgent, 1, ["first"]),
    ],
)
async def test_example_program_is_fully_covered(
    mock: MockModelServer, env_class: type[SumAgent], calls: int, branches: list[str]
) -> None:
    trajectory = await _trajectory(env_class(), mock)
    assert trajectory.termination_reason == "finished"
    assert trajectory.rewards == {"correct": 1.0}
    assert len(trajectory.model_calls) == calls
    assert all(call.has_tokens for call in trajectory.model_calls)
    assert [branch.began for branch in trajectory.branches] == branches
    samples = to_training_samples(trajectory)
    coverage = coverage_check(trajectory, samples)
    assert coverage.share == 1.0 and coverage.sampled_tokens > 0
    line = trajectory.to_json()
    assert line["coverage"]["trained_tokens"] == line["coverage"]["sampled_tokens"]  # type: ignore[typeddict-item]
    assert [b["began"] for b in line["coverage"]["branches"]] == branches  # type: ignore[typeddict-item]


async def test_planted_loss_fails_the_coverage_check(mock: MockModelServer) -> None:
    trajectory = await _trajectory(RewritingAgent(), mock)
    dropping_a_branch = to_training_samples(trajectory)[:-1]
    with pytest.raises(AssertionError, match="lost"):
        coverage_check(trajectory, dropping_a_branch)


def test_benchmax_run_with_the_embedded_mock(tmp_path: Path) -> None:
    output = tmp_path / "run.jsonl"
    finished = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmax.cli",
            "run",
            "examples/agents/env.py:CurlAgent",
            "--mock-policy",
            "examples/agents/policy.py:policy",
            "--max-examples",
            "2",
            "--group-size",
            "2",
            "-o",
            str(output),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert finished.returncode == 0, finished.stdout + finished.stderr
    lines = [json.loads(line) for line in output.read_text().splitlines()]
    rollouts = [line for line in lines if line.get("type") == "rollout"]
    assert len(rollouts) == 4
    for line in rollouts:
        assert line["termination_reason"] == "finished"
        assert line["coverage"]["sampled_tokens"] == line["coverage"]["trained_tokens"] > 0


def test_benchmax_validate_passes() -> None:
    finished = subprocess.run(
        [
            sys.executable, "-m", "benchmax.cli", "validate", "examples/agents/env.py:CurlAgent",
            "--mock-policy", "examples/agents/policy.py:policy",
        ],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert "0 failed" in finished.stdout
