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
import sys
from typing import Any

from _harness import (
    EXAMPLE,
    PROMPT,
    EchoAnswerEnv,
    bare_loop,
    mock_server_process,
    run_workers,
    use_stock_pool,
)

from benchmax.auth import StaticBearerAuth
from benchmax.envs import RolloutRequest


def _answers_42(reply: dict[str, Any]) -> None:
    assert reply["choices"][0]["message"]["content"] == "42"


def bare(base_url: str, concurrency: int, requests: int, *, pooled: bool = False) -> float:
    body = {"model": "m", "messages": PROMPT}
    return asyncio.run(bare_loop(base_url, concurrency, requests, body, _answers_42, pooled=pooled))


async def baseenv_loop(origin: str, concurrency: int, rollouts: int, group_size: int) -> float:
    """Rollouts/s of single-turn BaseEnv groups, ``concurrency`` rollouts in flight."""
    env = EchoAnswerEnv()
    example = EXAMPLE
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
        use_stock_pool()

    with mock_server_process("echo") as base_url:
        origin = base_url.removesuffix("/v1")
        concurrency, total = arguments.concurrency, arguments.rollouts
        bare(base_url, concurrency, 200)  # warm up both paths
        asyncio.run(baseenv_loop(origin, concurrency, 200, arguments.group_size))
        plain: list[float] = []
        pooled: list[float] = []
        env: list[float] = []
        for _ in range(arguments.repeats):
            plain.append(bare(base_url, concurrency, total))
            pooled.append(bare(base_url, concurrency, total, pooled=True))
            env.append(asyncio.run(baseenv_loop(origin, concurrency, total, arguments.group_size)))

    best_bare, best_pooled, best_env = max(plain), max(pooled), max(env)
    ratio = best_env / best_bare
    pool = "stock httpcore pool" if arguments.stock_pool else "KeepAlivePool"
    print(f"in flight: {concurrency}  rollouts per run: {total}  shared transport: {pool}")
    print(f"bare httpx.AsyncClient loop   : {best_bare:6.0f} requests/s  (runs: {_fmt(plain)})")
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
