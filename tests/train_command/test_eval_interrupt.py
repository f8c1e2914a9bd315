"""Ctrl-C during an evaluation stops it at once (an evaluation changes no weights, so there
is no step to finish) and says what was and was not saved. Run with
``uv run --group trl pytest -m train``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("trl")

from tests.train_command.test_benchmax_train import REPO, RUN_SECONDS, settings
from tests.trl_training.tiny_policy import build_model, build_tokenizer

from benchmax.results import read_results

pytestmark = pytest.mark.train

EVAL_EXAMPLES, EVAL_GROUP = 40, 4


def test_ctrl_c_during_the_base_evaluation_stops_it_and_says_what_was_kept(
    tmp_path: Path,
) -> None:
    model = tmp_path / "model"
    tokenizer = build_tokenizer()
    build_model(tokenizer).save_pretrained(model)
    tokenizer.save_pretrained(model)
    output = tmp_path / "run"
    args = settings(model, output, "--steps", "5")
    # A long evaluation: 40 examples x 4 rollouts of up to 400 tokens (ignore the defaults).
    args += ["--eval-examples", str(EVAL_EXAMPLES), "--eval-group-size", str(EVAL_GROUP)]
    args += ["--max-tokens", "400"]
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmax.cli", "train", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "COLUMNS": "200"},
    )
    eval_file = output / "eval" / "step-0.jsonl"
    try:
        deadline = time.monotonic() + RUN_SECONDS
        while not eval_file.is_file():
            assert process.poll() is None, process.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the base evaluation never started"
            time.sleep(0.2)
        process.send_signal(signal.SIGINT)  # once: no second Ctrl-C needed
        _, stderr = process.communicate(timeout=RUN_SECONDS)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, stderr[-3000:]
    shown = " ".join(stderr.split())
    assert f"stopped during the evaluation after step 0: {eval_file} keeps the groups" in shown
    assert "nothing was trained yet" in shown
    assert "weights were mid-update" not in shown
    # It stopped the evaluation instead of finishing it (and never trained).
    assert len(read_results(eval_file).rollouts) < EVAL_EXAMPLES * EVAL_GROUP
    assert not (output / "metrics.jsonl").exists() or not (output / "metrics.jsonl").read_text()
