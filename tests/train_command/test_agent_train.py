"""``benchmax train`` on an ``AgentEnv`` example: a shell pipeline of curl calls the
embedded sampler through the capture endpoint, and every rollout line carries full coverage.
Run with ``uv run --group trl pytest -m train tests/train_command/test_agent_train.py``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")

from tests.trl_training.tiny_policy import build_model, build_tokenizer

from benchmax.training import read_trajectories

pytestmark = pytest.mark.train

REPO = Path(__file__).resolve().parents[2]
AGENTS = REPO / "examples" / "agents"


def test_train_an_agent_program_with_full_coverage(tmp_path: Path) -> None:
    model = tmp_path / "tiny-model"
    tokenizer = build_tokenizer()
    build_model(tokenizer).save_pretrained(model)
    tokenizer.save_pretrained(model)
    output = tmp_path / "run"
    done = subprocess.run(
        [
            sys.executable, "-m", "benchmax.cli", "train", f"{AGENTS}/env.py:CurlAgent",
            "--data", str(AGENTS), "--model", str(model), "--output-dir", str(output),
            "-k", "2", "--prompts-per-step", "2", "--max-tokens", "6", "--steps", "1",
            "--eval-examples", "2", "--eval-group-size", "1", "--seed", "3",
        ],
        capture_output=True, text=True, timeout=900, cwd=REPO,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    trajectories = list(read_trajectories(output / "rollouts.jsonl"))
    assert trajectories
    for trajectory in trajectories:
        assert trajectory.termination_reason == "finished", trajectory.termination_reason
        coverage = trajectory.coverage
        assert coverage is not None and coverage.sampled_tokens > 0
        assert coverage.trained_tokens == coverage.sampled_tokens
        assert [b.began for b in trajectory.branches] == ["first"]
