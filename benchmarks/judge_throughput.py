"""Judge throughput: ``score_rubrics`` calls/s against a bare httpx loop.

A ``MockModelServer`` runs in a separate process (``python -m benchmax.testing``)
and answers every chat completion with ``{"score": 1}`` at once. In this process
we measure, at the same number of requests in flight:

* **bare**: ``concurrency`` workers posting chat-completion bodies through one
  shared ``httpx.AsyncClient`` and decoding the JSON reply;
* **judge**: ``concurrency / 4`` rollouts scored concurrently with
  ``score_rubrics`` on 4 rubrics each (every judge call builds its own SDK client
  over the pooled transport, resolves auth, parses and validates the score).

Target (beyond.md §1): judge calls/s at least 50% of the bare loop.

    uv run python benchmarks/judge_throughput.py [--rollouts 64] [--calls 4000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from benchmax.auth import StaticBearerAuth
from benchmax.rewards import Judge, Rubric, score_rubrics

RUBRICS_PER_ROLLOUT = 4


def score_one(body: dict[str, Any]) -> str:
    """Mock-server policy: a judge that always answers a valid binary score."""
    return '{"score": 1, "reasoning": "ok"}'


def _start_server() -> tuple[subprocess.Popen[str], str]:
    policy = f"{Path(__file__).resolve()}:score_one"
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmax.testing", "--no-record", "--policy", policy],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if "listening on" not in line:
        process.kill()
        raise RuntimeError(f"mock server did not start: {line!r}")
    return process, line.rsplit(" ", 1)[-1].strip()


async def _run_workers(concurrency: int, total: int, call: Callable[[], Awaitable[int]]) -> float:
    """Run ``total`` units of work, ``concurrency`` at a time; return calls per second."""
    remaining = total
    calls = 0

    async def worker() -> None:
        nonlocal remaining, calls
        while remaining > 0:
            remaining -= 1
            done = await call()
            calls += done

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return calls / (time.perf_counter() - started)


async def bare_loop(base_url: str, concurrency: int, calls: int) -> float:
    """Calls/s of plain httpx posts (one shared client) at ``concurrency`` in flight."""
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=60.0) as client:
        body = {
            "model": "judge",
            "messages": [{"role": "user", "content": "grade this"}],
            "temperature": 0.0,
        }

        async def call() -> int:
            response = await client.post(
                "/chat/completions", json=body, headers={"Authorization": "Bearer bench"}
            )
            response.raise_for_status()
            json.loads(response.json()["choices"][0]["message"]["content"])
            return 1

        return await _run_workers(concurrency, calls, call)


async def judge_loop(base_url: str, rollouts: int, calls: int) -> float:
    """Calls/s of ``score_rubrics`` with ``rollouts`` rollouts (4 rubrics each) in flight."""
    judge = Judge(model="judge", base_url=base_url, auth=StaticBearerAuth("bench"))
    rubrics = [
        Rubric(f"criterion {k}", f"The answer satisfies criterion {k}.")
        for k in range(RUBRICS_PER_ROLLOUT)
    ]
    counter = 0

    async def call() -> int:
        nonlocal counter
        counter += 1
        rewards = await score_rubrics(
            f"rollout-{counter}",
            "The answer is 42.",
            ground_truth="42",
            rubrics=rubrics,
            question="What is six times seven?",
            judge=judge,
        )
        assert len(rewards) == RUBRICS_PER_ROLLOUT
        return RUBRICS_PER_ROLLOUT

    return await _run_workers(rollouts, calls // RUBRICS_PER_ROLLOUT, call)


async def measure(base_url: str, rollouts: int, calls: int, repeats: int) -> dict[str, float]:
    concurrency = rollouts * RUBRICS_PER_ROLLOUT
    await bare_loop(base_url, concurrency, concurrency)  # warm-up
    await judge_loop(base_url, rollouts, concurrency)
    bare, judged = [], []
    for _ in range(repeats):
        bare.append(await bare_loop(base_url, concurrency, calls))
        judged.append(await judge_loop(base_url, rollouts, calls))
    return {"bare": max(bare), "judge": max(judged)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rollouts", type=int, default=64, help="rollouts in flight")
    parser.add_argument("--calls", type=int, default=4000, help="judge calls per measurement")
    parser.add_argument("--repeats", type=int, default=3, help="measurements (best is kept)")
    arguments = parser.parse_args()
    logging.disable(logging.INFO)  # per-rollout INFO lines are not what we measure
    process, base_url = _start_server()
    try:
        result = asyncio.run(
            measure(base_url, arguments.rollouts, arguments.calls, arguments.repeats)
        )
    finally:
        process.terminate()
        process.wait(timeout=10)
    ratio = result["judge"] / result["bare"]
    concurrency = arguments.rollouts * RUBRICS_PER_ROLLOUT
    print(f"in flight: {concurrency} requests ({arguments.rollouts} rollouts x 4 rubrics)")
    print(f"bare httpx loop: {result['bare']:8.0f} calls/s")
    print(f"score_rubrics:   {result['judge']:8.0f} calls/s ({ratio:.0%} of bare; target >= 50%)")
    return 0 if ratio >= 0.5 else 1


if __name__ == "__main__":
    sys.exit(main())
