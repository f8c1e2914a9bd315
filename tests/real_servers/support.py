"""Helpers of the real-server tests: run ``benchmax run`` as a user would, read what it
recorded, and compare it with the raw replies a :class:`RecordingProxy` kept."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmax.training import read_trajectories
from benchmax.trajectory import ModelCall, Trajectory

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ("examples/quickstart/env.py:QuickStartEnv", "--data", "examples/quickstart")
CALCULATOR = ("examples/calculator/env.py:CalculatorEnv", "--data", "examples/calculator")
STRICT_CALCULATOR = (
    "tests/real_servers/strict_calculator.py:StrictCalculatorEnv",
    "--data",
    "examples/calculator",
)
RUN_TIMEOUT_SECONDS = 3600


def benchmax_run(
    base_url: str, model: str, *args: object, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``benchmax run ARGS --base-url URL --model MODEL`` in a subprocess from the repo root."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmax.cli",
            "run",
            *map(str, args),
            "--base-url",
            base_url,
            "--model",
            model,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_SECONDS,
        env={**os.environ, **(env or {})},
    )


def trajectories(path: Path) -> list[Trajectory]:
    return list(read_trajectories(path))


def token_calls(trajectory: Trajectory) -> list[ModelCall]:
    return [call for call in trajectory.model_calls if call.has_tokens]


def prefix_breaks(calls: Sequence[ModelCall]) -> int:
    """Counted here, independently of benchmax: a call whose prompt ids do not start with
    the previous call's prompt + completion ids."""
    breaks = 0
    for previous, call in itertools.pairwise(calls):
        assert previous.prompt_token_ids is not None and previous.completion_token_ids is not None
        assert call.prompt_token_ids is not None
        before = (*previous.prompt_token_ids, *previous.completion_token_ids)
        if call.prompt_token_ids[: len(before)] != before:
            breaks += 1
    return breaks


def raw_tokens(reply: dict[str, Any]) -> tuple[tuple[int, ...], tuple[int, ...], tuple[float, ...]]:
    """(prompt ids, completion ids, logprobs) of a raw vLLM reply's first choice."""
    choice = reply["choices"][0]
    logprobs = tuple(entry["logprob"] for entry in choice["logprobs"]["content"])
    return tuple(reply["prompt_token_ids"]), tuple(choice["token_ids"]), logprobs


def recorded_tokens(call: ModelCall) -> tuple[Any, Any, Any]:
    return call.prompt_token_ids, call.completion_token_ids, call.completion_logprobs


def assert_same_tokens(
    recorded: Sequence[tuple[Any, Any, Any]], raw: Sequence[tuple[Any, Any, Any]]
) -> None:
    """The recorded calls are the raw replies: the same ids, and logprobs as sent (benchmax
    keeps 5 decimals: ``trajectory.LOGPROB_DECIMALS``)."""
    assert len(recorded) == len(raw)
    for (prompt, completion, logprobs), (raw_prompt, raw_completion, raw_logprobs) in zip(
        sorted(recorded), sorted(raw), strict=True
    ):
        assert (prompt, completion) == (raw_prompt, raw_completion)
        assert len(logprobs) == len(raw_logprobs)
        assert all(abs(a - b) <= 5e-6 for a, b in zip(logprobs, raw_logprobs, strict=True))


def one_line_error(completed: subprocess.CompletedProcess[str]) -> str:
    """The single ``Error: ...`` line a refused run prints."""
    assert completed.returncode != 0, completed.stdout + completed.stderr
    lines = [line for line in (completed.stdout + completed.stderr).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("Error: "), lines
    return lines[0]


def write_rows(directory: Path, split: str, rows: Sequence[dict[str, Any]]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{split}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return directory
