"""BaseEnv throughput: single-turn rollouts/s against a bare httpx request loop.

A ``MockModelServer`` runs in a separate process (``python -m benchmax.testing``)
and answers every chat completion at once (``echo``). In this process we measure,
at the same number of requests in flight:

* **bare**: ``concurrency`` workers posting chat-completion bodies through one
  shared ``httpx.AsyncClient`` (no connection cap) and decoding the JSON reply;
* **BaseEnv**: ``concurrency / group_size`` workers each running groups of
  single-turn rollouts through ``env.run_group`` (per rollout: its own session
  URL, auth resolved per request, an SDK client over the loop's pooled
  transport, the transcript, ``compute_reward``, group validation).

Target (beyond.md §1): BaseEnv rollouts/s at least 50% of the bare loop.
``--stock-pool`` measures with httpcore's stock connection pool instead of
``benchmax.envs._http_connections.KeepAlivePool`` (the "before" figures).

    uv run python benchmarks/baseenv_throughput.py [--concurrency 64] [--rollouts 4000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from benchmax.auth import StaticBearerAuth
from benchmax.envs import BaseEnv, BaseRollout, Dataset, Example, RolloutRequest, _connection_pool

PROMPT = [{"role": "user", "content": "42"}]


class EchoAnswerEnv(BaseEnv):
    """One model call; reward 1.0 when the reply is the expected answer."""

    reward_keys = ("correct",)
    max_turns = 1

    async def create_dataset(
        self, split: Any, base_dir: Path, *, max_examples: int | None = None
    ) -> Dataset[dict[str, Any]]:
        return Dataset([Example(id="e", payload={"prompt_messages": PROMPT, "answer": "42"})])

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        content = rollout.messages[-1]["content"]
        return {"correct": 1.0 if content == rollout.example_args["answer"] else 0.0}


def start_server() -> tuple[subprocess.Popen[str], str]:
    """Start the mock server in its own process; return it and its base URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmax.testing", "--no-record", "--policy", "echo"],
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


async def run_workers(workers: int, units: int, unit: Callable[[], Awaitable[int]]) -> float:
    """Run ``units`` units of work on ``workers`` workers; return completions per second."""
    remaining = units
    done = 0

    async def worker() -> None:
        nonlocal remaining, done
        while remaining > 0:
            remaining -= 1
            completed = await unit()
            done += completed

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(workers)))
    return done / (time.perf_counter() - started)


async def bare_loop(
    base_url: str, concurrency: int, requests: int, *, pooled: bool = False
) -> float:
    """Requests/s of plain httpx posts through one shared client.

    ``pooled=True`` uses a client over the loop's shared transport instead of
    httpx's own connection pool, isolating what BaseEnv adds above the wire.
    """
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    client = (
        _connection_pool.pooled_http_client(timeout=60.0)
        if pooled
        else httpx.AsyncClient(limits=limits, timeout=60.0)
    )
    async with client:
        body = {"model": "m", "messages": PROMPT}

        async def post() -> int:
            response = await client.post(
                f"{base_url}/chat/completions", json=body, headers={"Authorization": "Bearer bench"}
            )
            response.raise_for_status()
            assert response.json()["choices"][0]["message"]["content"] == "42"
            return 1

        return await run_workers(concurrency, requests, post)


async def baseenv_loop(origin: str, concurrency: int, rollouts: int, group_size: int) -> float:
    """Rollouts/s of single-turn BaseEnv groups, ``concurrency`` rollouts in flight."""
    env = EchoAnswerEnv()
    example = Example(id="e", payload={"prompt_messages": PROMPT, "answer": "42"})
    auth = StaticBearerAuth("bench")
    counter = 0

    async def group() -> int:
        nonlocal counter
        counter += 1
        requests = [
            RolloutRequest(
                rollout_id=f"g{counter}-r{k}",
                example=example,
                model="m",
                base_url=f"{origin}/sessions/g{counter}-r{k}/v1",
                model_auth=auth,
            )
            for k in range(group_size)
        ]
        outcomes = await env.run_group(requests)
        assert all(o.rewards == {"correct": 1.0} for o in outcomes.values())
        return group_size

    try:
        return await run_workers(concurrency // group_size, rollouts // group_size, group)
    finally:
        await env.aclose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, default=64, help="requests in flight")
    parser.add_argument("--rollouts", type=int, default=4000, help="rollouts (requests) per run")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each; best is kept")
    parser.add_argument(
        "--stock-pool", action="store_true", help="use httpcore's stock pool (before figures)"
    )
    arguments = parser.parse_args()
    if arguments.stock_pool:
        _connection_pool.install_keep_alive_pool = lambda transport: transport  # type: ignore[assignment]

    process, base_url = start_server()
    origin = base_url.removesuffix("/v1")
    try:
        concurrency, total = arguments.concurrency, arguments.rollouts
        asyncio.run(bare_loop(base_url, concurrency, 200))  # warm up both paths
        asyncio.run(baseenv_loop(origin, concurrency, 200, arguments.group_size))
        bare: list[float] = []
        pooled: list[float] = []
        env: list[float] = []
        for _ in range(arguments.repeats):
            bare.append(asyncio.run(bare_loop(base_url, concurrency, total)))
            pooled.append(asyncio.run(bare_loop(base_url, concurrency, total, pooled=True)))
            env.append(asyncio.run(baseenv_loop(origin, concurrency, total, arguments.group_size)))
    finally:
        process.terminate()
        process.wait(10)

    best_bare, best_pooled, best_env = max(bare), max(pooled), max(env)
    ratio = best_env / best_bare
    pool = "stock httpcore pool" if arguments.stock_pool else "KeepAlivePool"
    print(f"in flight: {concurrency}  rollouts per run: {total}  shared transport: {pool}")
    print(f"bare httpx.AsyncClient loop   : {best_bare:6.0f} requests/s  (runs: {_fmt(bare)})")
    print(f"bare loop, shared transport   : {best_pooled:6.0f} requests/s  (runs: {_fmt(pooled)})")
    print(f"BaseEnv single-turn rollouts  : {best_env:6.0f} rollouts/s  (runs: {_fmt(env)})")
    print(f"BaseEnv / bare httpx loop     : {ratio:6.0%}  (target >= 50%)")
    overhead = 1e6 / best_env - 1e6 / best_pooled
    print(f"BaseEnv cost above the wire   : {overhead:6.0f} us per rollout")
    return 0 if ratio >= 0.5 else 1


def _fmt(values: list[float]) -> str:
    return ", ".join(f"{value:.0f}" for value in values)


if __name__ == "__main__":
    sys.exit(main())
