"""BaseEnv with 1,000 rollouts in flight: memory growth and wall time.

A ``MockModelServer`` runs in a separate process (``python -m benchmax.testing``)
and holds every chat completion 2 s before answering. In this process one
``run_group`` of 1,000 single-turn rollouts runs (each with its own session URL
and bearer key), so all 1,000 model calls are in flight at once.

Reported: wall time of the group, and peak resident memory growth over the
process's memory before the group (after a small warm-up group loaded every
module); for context, the wall time of the same burst sent as bare httpx posts
over the shared transport (the floor this machine and server allow).
Targets (beyond.md §1): at most 100 MB and at most the 2 s delay plus 2 s.
``--stock-pool`` measures with httpcore's stock connection pool instead of
``benchmax.envs._http_connections.KeepAlivePool`` (the "before" figures).

    uv run python benchmarks/baseenv_inflight.py [--rollouts 1000] [--delay 2.0]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import time
from pathlib import Path
from typing import Any

from _harness import EXAMPLE, PROMPT, EchoAnswerEnv, mock_server_process, use_stock_pool

from benchmax.auth import StaticBearerAuth
from benchmax.envs import RolloutRequest, _connection_pool

HOLD_SECONDS_VARIABLE = "BENCHMAX_BENCH_HOLD_SECONDS"


async def hold_then_echo(body: dict[str, Any]) -> str:
    """Mock-server policy: answer the last user message after holding the request."""
    await asyncio.sleep(float(os.environ.get(HOLD_SECONDS_VARIABLE, "2.0")))
    return body["messages"][-1]["content"]


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not found in /proc/self/status")


def _reset_peak_rss() -> bool:
    """Reset VmHWM (Linux ≥ 4.0); False where not permitted."""
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
        return True
    except OSError:
        return False


async def one_group(env: EchoAnswerEnv, origin: str, size: int, tag: str) -> float:
    example = EXAMPLE
    requests = [
        RolloutRequest(
            rollout_id=f"{tag}-{k}",
            example=example,
            model="m",
            base_url=f"{origin}/sessions/{tag}-{k}/v1",
            model_auth=StaticBearerAuth(f"key-{k}"),
        )
        for k in range(size)
    ]
    started = time.perf_counter()
    outcomes = await env.run_group(requests)
    elapsed = time.perf_counter() - started
    failed = [o.termination_reason for o in outcomes.values() if o.rewards != {"correct": 1.0}]
    if failed:
        raise RuntimeError(f"{len(failed)} rollouts failed, e.g. {failed[0]}")
    return elapsed


async def bare_floor(origin: str, requests: int) -> float:
    """Wall time of the same burst as bare httpx posts over the shared transport."""
    async with _connection_pool.pooled_http_client() as client:

        async def post(k: int) -> None:
            response = await client.post(
                f"{origin}/sessions/bare-{k}/v1/chat/completions",
                json={"model": "m", "messages": PROMPT},
                headers={"Authorization": f"Bearer key-{k}"},
            )
            assert response.json()["choices"][0]["message"]["content"] == "42"

        started = time.perf_counter()
        await asyncio.gather(*(post(k) for k in range(requests)))
        return time.perf_counter() - started


async def measure(origin: str, rollouts: int) -> tuple[float, int, int, int]:
    """Wall time, baseline RSS, peak RSS and peak sampled RSS (KiB) of one big group."""
    env = EchoAnswerEnv()
    await one_group(env, origin, 20, "warmup")
    gc.collect()
    baseline = _status_kib("VmRSS")
    exact_peak = _reset_peak_rss()
    sampled_peak = baseline

    async def sample() -> None:
        nonlocal sampled_peak
        while True:
            sampled_peak = max(sampled_peak, _status_kib("VmRSS"))
            await asyncio.sleep(0.02)

    sampler = asyncio.create_task(sample())
    try:
        elapsed = await one_group(env, origin, rollouts, "big")
    finally:
        sampler.cancel()
    peak = _status_kib("VmHWM") if exact_peak else sampled_peak
    await env.aclose()
    return elapsed, baseline, peak, sampled_peak


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rollouts", type=int, default=1000)
    parser.add_argument("--delay", type=float, default=2.0, help="seconds the server holds calls")
    parser.add_argument(
        "--stock-pool", action="store_true", help="use httpcore's stock pool (before figures)"
    )
    arguments = parser.parse_args()
    if arguments.stock_pool:
        use_stock_pool()

    policy = f"{Path(__file__).resolve()}:hold_then_echo"
    with mock_server_process(policy, {HOLD_SECONDS_VARIABLE: str(arguments.delay)}) as base_url:
        origin = base_url.removesuffix("/v1")
        elapsed, baseline, peak, sampled = asyncio.run(measure(origin, arguments.rollouts))
        floor = asyncio.run(bare_floor(origin, arguments.rollouts))

    growth_mb = (peak - baseline) / 1024
    wall_target = arguments.delay + 2.0
    pool = "stock httpcore pool" if arguments.stock_pool else "KeepAlivePool"
    print(f"rollouts in flight: {arguments.rollouts}  server hold: {arguments.delay:g}s  ({pool})")
    print(f"wall time         : {elapsed:6.2f} s   (target <= {wall_target:g} s)")
    print(f"  bare httpx burst: {floor:6.2f} s   (same burst, no BaseEnv/SDK)")
    print(f"baseline RSS      : {baseline / 1024:6.1f} MB")
    print(f"peak RSS growth   : {growth_mb:6.1f} MB   (target <= 100 MB)")
    print(f"  sampled growth  : {(sampled - baseline) / 1024:6.1f} MB (every 20 ms)")
    return 0 if growth_mb <= 100 and elapsed <= wall_target else 1


if __name__ == "__main__":
    sys.exit(main())
