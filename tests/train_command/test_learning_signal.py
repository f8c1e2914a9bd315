"""No silent nothing: a ``benchmax train`` whose every rollout fails stops once no step
can learn (exit 4, one line naming the cause), and steps whose every group has zero reward
variance are warned about. Run with ``uv run --group trl pytest -m train``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("trl")

from tests.train_command.test_benchmax_train import benchmax_train
from tests.trl_training.tiny_policy import build_model, build_tokenizer

from benchmax.training import read_metrics

pytestmark = pytest.mark.train

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("tiny-model")
    tokenizer = build_tokenizer()
    build_model(tokenizer).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def data(root: Path, *, fail: bool) -> Path:
    root.mkdir()
    rows = [{"a": a, "b": a + 1, "fail": fail} for a in range(4)]
    (root / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (root / "eval.jsonl").write_text(json.dumps({"a": 1, "b": 2}) + "\n")
    return root


def settings(env: str, model: Path, data_dir: Path, output: Path, steps: int) -> list[str]:
    return [
        f"{HERE / 'signal_envs.py'}:{env}",
        "--data", str(data_dir),
        "--model", str(model),
        "--output-dir", str(output),
        "-k", "2",
        "--prompts-per-step", "2",
        "--max-tokens", "4",
        "--eval-examples", "1",
        "--eval-group-size", "1",
        "--steps", str(steps),
        "--seed", "1",
    ]  # fmt: skip


def test_a_run_whose_every_rollout_fails_stops_once_no_step_can_learn(
    tiny_model: Path, tmp_path: Path
) -> None:
    output = tmp_path / "run"
    done = benchmax_train(
        *settings("FailingTrainEnv", tiny_model, data(tmp_path / "d", fail=True), output, 10)
    )
    assert done.returncode == 4, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: untrustworthy: no step can learn: every rollout of steps 1-3")
    assert "(setup_error 12)" in " ".join(done.stderr.split())
    assert [m["step"] for m in read_metrics(output / "metrics.jsonl")] == [1, 2, 3]
    assert (output / "checkpoints" / "step-3").is_dir()


def test_steps_with_every_group_at_zero_variance_are_warned_about(
    tiny_model: Path, tmp_path: Path
) -> None:
    output = tmp_path / "run"
    done = benchmax_train(
        *settings("ConstantRewardEnv", tiny_model, data(tmp_path / "d", fail=False), output, 3)
    )
    assert done.returncode == 0, done.stderr[-3000:]
    message = " ".join(done.stderr.split())
    assert "warning: every group of steps 1-3 gave all its rollouts the same reward" in message
    assert "zero variance" in message
    assert "eval after step 0: mean correct 0.000" in message  # names the reward key
