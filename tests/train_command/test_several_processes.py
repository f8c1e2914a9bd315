"""``benchmax train --num-processes 2`` on CPU (two ranks over gloo): the tiny Qwen2, the
arithmetic example, each rank's embedded sampler.

One run is interrupted with SIGINT sent to the launcher (what Ctrl-C in a terminal does):
every rank stops after the same step with one checkpoint. It is then resumed under
``accelerate launch`` (the documented command) to its last step. The run directory must be
the one a single process writes: one rollouts file with every rollout of every rank, each
step's groups whole and with the ids a single process gives them, one metrics line per
step, each evaluation and checkpoint once. Run with
``uv run --group trl pytest -m train tests/train_command/test_several_processes.py``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("trl")

from benchmax.results import read_results
from benchmax.training import read_metrics

pytestmark = pytest.mark.train

REPO = Path(__file__).resolve().parents[2]
ARITHMETIC = REPO / "examples" / "arithmetic"
RUN_SECONDS = 900  # a generous bound for one run on a busy 2-core machine
GROUP, PROMPTS = 2, 2


def settings(model: Path, output: Path) -> list[str]:
    return [
        f"{ARITHMETIC}/env.py:ArithmeticEnv",
        "--data", str(ARITHMETIC),
        "--model", str(model),
        "--output-dir", str(output),
        "-k", str(GROUP),
        "--prompts-per-step", str(PROMPTS),
        "--max-tokens", "4",
        "--eval-examples", "2",
        "--eval-group-size", "2",
        "--learning-rate", "1e-3",
        "--seed", "3",
        "--steps", "100",
        "--num-processes", "2",
    ]  # fmt: skip


def interrupted_run(model: Path, output: Path) -> tuple[int, str]:
    """Start the run, send SIGINT to the launcher once a step is written, wait for it."""
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmax.cli", "train", *settings(model, output)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "COLUMNS": "200"},
    )
    try:
        deadline = time.monotonic() + RUN_SECONDS
        while not list(read_metrics(output / "metrics.jsonl")):
            assert process.poll() is None, process.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "no step was written"
            time.sleep(0.5)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=RUN_SECONDS)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return process.returncode, stderr


def rollouts_by_step(output: Path) -> dict[int, list[tuple[str, int]]]:
    steps: dict[int, list[tuple[str, int]]] = {}
    for rollout in read_results(output / "rollouts.jsonl").rollouts:
        assert rollout.step is not None
        steps.setdefault(rollout.step, []).append((rollout.rollout_id, rollout.example_index))
    return {step: sorted(items) for step, items in steps.items()}


def test_two_processes_write_one_run_directory_stop_together_and_resume(
    tiny_model: Path, tmp_path: Path
) -> None:
    output = tmp_path / "run"
    status, stderr = interrupted_run(tiny_model, output)
    assert status == 130, stderr[-3000:]
    said = " ".join(stderr.split())
    assert said.count("stopping after the current step") == 1  # rank 0 speaks for both
    assert said.count("resume with: ") == 1  # under uv run, the command starts with uv run
    assert f"benchmax train --config {output / 'config.toml'} --resume" in said
    assert "Aborted" not in said
    stopped = [line["step"] for line in read_metrics(output / "metrics.jsonl")]
    last = stopped[-1]
    assert stopped == list(range(1, last + 1)) and last < 100
    assert (output / "checkpoints" / f"step-{last}" / "trainer_state.json").is_file()
    assert "num_processes = 2" in (output / "config.toml").read_text()

    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
    assert accelerate is not None
    command = [
        accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no",
        "-m", "benchmax.cli", "train",
        "--config", str(output / "config.toml"), "--resume", "--steps", str(last + 1),
    ]  # fmt: skip
    resumed = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
        cwd=REPO,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert resumed.stdout.count(f"trained {last + 1} steps") == 1

    steps = last + 1
    results = read_results(output / "rollouts.jsonl")
    assert len(results.rollouts) == steps * PROMPTS * GROUP
    by_step = rollouts_by_step(output)
    assert sorted(by_step) == list(range(1, steps + 1))
    for step, items in by_step.items():
        # Both ranks' groups, whole, with the ids and file places one process gives them.
        assert [rollout_id for rollout_id, _ in items] == [
            f"trl-{step - 1}-{group}-{index}" for group in range(PROMPTS) for index in range(GROUP)
        ]
        places = Counter(place for _, place in items)
        first = (step - 1) * PROMPTS
        assert places == dict.fromkeys(range(first, first + PROMPTS), GROUP)
    group_of = {r.rollout_id: r.example_id for r in results.rollouts}
    for step in by_step:
        for group in range(PROMPTS):
            assert len({group_of[f"trl-{step - 1}-{group}-{i}"] for i in range(GROUP)}) == 1

    metrics = list(read_metrics(output / "metrics.jsonl"))
    assert [line["step"] for line in metrics] == list(range(1, steps + 1))
    assert all(line["groups"] == PROMPTS for line in metrics)
    assert all(line["rollouts"] == PROMPTS * GROUP for line in metrics)
    assert sorted(p.name for p in (output / "eval").glob("step-*.jsonl")) == [
        "step-0.jsonl",
        f"step-{steps}.jsonl",
    ]
    assert len(read_results(output / "eval" / f"step-{steps}.jsonl").rollouts) == 2 * 2
    assert (output / "eval" / "compare.json").is_file()
    checkpoints = sorted(p.name for p in (output / "checkpoints").glob("step-*"))
    assert checkpoints == sorted([f"step-{last}", f"step-{steps}"])
    final = output / "checkpoints" / f"step-{steps}"
    assert {"rng_state_0.pth", "rng_state_1.pth", "benchmax_state.json"} <= {
        p.name for p in final.iterdir()
    }
    assert not list((output / "checkpoints").glob("checkpoint-*"))


FSDP_CONFIG = """\
compute_environment: LOCAL_MACHINE
distributed_type: FSDP
num_machines: 1
num_processes: 2
mixed_precision: 'no'
fsdp_config:
  fsdp_version: 2
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_state_dict_type: SHARDED_STATE_DICT
"""


def test_an_fsdp_config_without_a_server_is_refused_in_one_line(
    tiny_model: Path, tmp_path: Path
) -> None:
    config = tmp_path / "fsdp.yaml"
    config.write_text(FSDP_CONFIG)
    output = tmp_path / "run"
    command = [*settings(tiny_model, output), "--accelerate-config", str(config)]
    done = subprocess.run(
        [sys.executable, "-m", "benchmax.cli", "train", *command],
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
        cwd=REPO,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert done.returncode == 3, done.stderr[-3000:]
    refusal = "DeepSpeed and FSDP need --base-url (a vLLM server)"
    assert done.stderr.count(refusal) == 1, done.stderr[-3000:]
    assert not output.exists()
