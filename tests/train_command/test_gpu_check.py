"""``benchmarks/gpu_check.py --tiny``: the GPU check's whole path (bf16 checkpoint, fp32
masters, micro-batches, weights moved, sampler vs ``generate``) on a CPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")

pytestmark = pytest.mark.train

REPO = Path(__file__).resolve().parents[2]


def gpu_check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "gpu_check.py"), *args],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=REPO,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
    )


def test_the_tiny_gpu_check_trains_fp32_masters_and_prints_its_numbers(tmp_path: Path) -> None:
    done = gpu_check("--tiny", "--output", str(tmp_path / "run"))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert "device: CPU; model: tiny" in lines
    assert "fp32 master weights: yes; layer 0 q_proj moved: 100.0%" in lines
    assert any(line.startswith("s/step: ") and "micro-batch 2" in line for line in lines)
    assert any("embedded sampler" in line and "transformers generate" in line for line in lines)
    assert (tmp_path / "run" / "metrics.jsonl").is_file()


def test_without_a_gpu_it_asks_for_tiny() -> None:
    done = gpu_check()
    assert done.returncode == 2 and "no CUDA GPU here; run with --tiny" in done.stderr
