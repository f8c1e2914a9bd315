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
import sys
from pathlib import Path
from typing import Any

from _harness import bare_loop, mock_server_process, run_workers

from benchmax.auth import StaticBearerAuth
from benchmax.rewards import Judge, Rubric, score_rubrics

RUBRICS_PER_ROLLOUT = 4
JUDGE_BODY = {
    "model": "judge",
    "messages": [{"role": "user", "content": "grade this"}],
    "temperature": 0.0,
}


async def score_one(body: dict[str, Any]) -> str:
    """Mock-server policy: a judge that always answers a valid binary score (``async``, so
    the server answers it on its loop instead of in a worker thread)."""
    return '{"score": 1, "reasoning": "ok"}'


def _parses_score(reply: dict[str, Any]) -> None:
    json.loads(reply["choices"][0]["message"]["content"])


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

    return await run_workers(rollouts, calls // RUBRICS_PER_ROLLOUT, call)


async def measure(base_url: str, rollouts: int, calls: int, repeats: int) -> dict[str, float]:
    concurrency = rollouts * RUBRICS_PER_ROLLOUT
    await bare_loop(base_url, concurrency, concurrency, JUDGE_BODY, _parses_score)  # warm-up
    await judge_loop(base_url, rollouts, concurrency)
    bare, judged = [], []
    for _ in range(repeats):
        bare.append(await bare_loop(base_url, concurrency, calls, JUDGE_BODY, _parses_score))
        judged.append(await judge_loop(base_url, rollouts, calls))
    return {"bare": max(bare), "judge": max(judged)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rollouts", type=int, default=64, help="rollouts in flight")
    parser.add_argument("--calls", type=int, default=4000, help="judge calls per measurement")
    parser.add_argument("--repeats", type=int, default=3, help="measurements (best is kept)")
    arguments = parser.parse_args()
    logging.disable(logging.INFO)  # per-rollout INFO lines are not what we measure
    with mock_server_process(f"{Path(__file__).resolve()}:score_one") as base_url:
        result = asyncio.run(
            measure(base_url, arguments.rollouts, arguments.calls, arguments.repeats)
        )
    ratio = result["judge"] / result["bare"]
    concurrency = arguments.rollouts * RUBRICS_PER_ROLLOUT
    print(f"in flight: {concurrency} requests ({arguments.rollouts} rollouts x 4 rubrics)")
    print(f"bare httpx loop: {result['bare']:8.0f} calls/s")
    print(f"score_rubrics:   {result['judge']:8.0f} calls/s ({ratio:.0%} of bare; target >= 50%)")
    return 0 if ratio >= 0.5 else 1


if __name__ == "__main__":
    sys.exit(main())
