"""Model HTTP benchmarks, printed side by side in one run (issue "One model-HTTP seam").

A minimal keep-alive server (``_fast_server.py``) runs in its own process; in this
process, each measurement on a fresh event loop:

1. **throughput**, 32 requests in flight: a bare aiohttp POST loop (one shared
   ``ClientSession``, no connection cap, JSON encode and decode) against BaseEnv
   single-turn rollouts through ``run_group`` (groups of 8, 4 groups in flight; per
   rollout: its own session URL, auth per request, transcript, ``compute_reward``,
   group validation). Rates and process CPU per request/rollout, best of
   ``--repeats``. Targets: >= 2,500 rollouts/s and >= 40% of the bare loop.
2. **in flight**: 8,000 rollouts with 1,000 in flight, the server holding each
   request 2 s: wall time against the 16 s floor (target <= 1.25x) and peak RSS
   growth.
3. **judge**: ``score_rubrics`` with 4 rubrics, 64 rollouts in flight (each judge
   call: its own ``AsyncOpenAI`` over the pooled client, auth per request, parse
   and validate the verdict).
4. **start-up**: ``benchmax --help``, ``import benchmax.envs`` and a 1-example
   ``benchmax run`` as subprocesses (best of 3 wall times).

    uv run python benchmarks/model_http.py [--repeats 3] [--skip inflight,judge,startup]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from _harness import EXAMPLE, HERE, PROMPT, EchoAnswerEnv, fast_server, run_workers

from benchmax.auth import StaticBearerAuth
from benchmax.envs import RolloutRequest
from benchmax.rewards import Judge, Rubric, score_rubrics

GROUP_SIZE = 8
RUBRICS = 4
BEFORE = {  # measured on the same machine class before this change (issue 10 brief)
    "baseenv": "754 rollouts/s, ~0.8 ms CPU per rollout above the wire",
    "bare httpx": "566 requests/s",
    "judge": "~580 calls/s",
    "inflight": "~26 s for 8,000 rollouts at 1,000 in flight (floor 16 s)",
}


# -- 1. throughput --------------------------------------------------------------------


async def bare_aiohttp(origin: str, concurrency: int, requests: int) -> tuple[float, float]:
    """Requests/s and CPU microseconds per request of plain aiohttp posts."""
    url = f"{origin}/v1/chat/completions"
    body = {"model": "m", "messages": PROMPT}
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def post() -> int:
            async with session.post(
                url, json=body, headers={"Authorization": "Bearer bench"}
            ) as response:
                reply = json.loads(await response.read())
            assert reply["choices"][0]["message"]["content"] == "42"
            return 1

        await run_workers(concurrency, concurrency * 4, post)  # warm the connections
        wall, cpu, done = await run_workers(concurrency, requests, post)
    return done / wall, cpu / done * 1e6


async def baseenv_groups(origin: str, concurrency: int, rollouts: int) -> tuple[float, float]:
    """Rollouts/s and CPU microseconds per rollout of single-turn BaseEnv groups."""
    env = EchoAnswerEnv()
    auth = StaticBearerAuth("bench")
    counter = 0

    async def group() -> int:
        nonlocal counter
        counter += 1
        requests = [
            RolloutRequest(
                rollout_id=f"g{counter}-r{k}",
                example=EXAMPLE,
                model="m",
                base_url=f"{origin}/sessions/g{counter}-r{k}/v1",
                model_auth=auth,
            )
            for k in range(GROUP_SIZE)
        ]
        outcomes = await env.run_group(requests)
        assert all(o.rewards == {"correct": 1.0} for o in outcomes.values()), outcomes
        return GROUP_SIZE

    try:
        workers = max(1, concurrency // GROUP_SIZE)
        await run_workers(workers, workers * 4, group)
        wall, cpu, done = await run_workers(workers, rollouts // GROUP_SIZE, group)
    finally:
        await env.aclose()
    return done / wall, cpu / done * 1e6


# -- 2. in flight ----------------------------------------------------------------------


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not found in /proc/self/status")


def _reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
        return True
    except OSError:
        return False


async def in_flight(origin: str, total: int, concurrent: int) -> tuple[float, float, float]:
    """Wall seconds, peak RSS growth (MB) and CPU ms per rollout of ``total`` held
    rollouts, ``concurrent`` in flight."""
    env = EchoAnswerEnv()
    counter = 0

    async def group() -> int:
        nonlocal counter
        counter += 1
        requests = [
            RolloutRequest(
                rollout_id=f"h{counter}-r{k}",
                example=EXAMPLE,
                model="m",
                base_url=f"{origin}/hold/h{counter}-r{k}/v1",
                model_auth=StaticBearerAuth(f"key-{counter}-{k}"),
            )
            for k in range(GROUP_SIZE)
        ]
        outcomes = await env.run_group(requests)
        assert all(o.rewards == {"correct": 1.0} for o in outcomes.values()), outcomes
        return GROUP_SIZE

    workers = concurrent // GROUP_SIZE
    await run_workers(4, 4, group)  # load every module, open a few connections
    gc.collect()
    baseline = _status_kib("VmRSS")
    exact = _reset_peak_rss()
    sampled = baseline

    async def sample() -> None:
        nonlocal sampled
        while True:
            sampled = max(sampled, _status_kib("VmRSS"))
            await asyncio.sleep(0.05)

    sampler = asyncio.create_task(sample())
    try:
        wall, cpu, done = await run_workers(workers, total // GROUP_SIZE, group)
    finally:
        sampler.cancel()
        await env.aclose()
    peak = _status_kib("VmHWM") if exact else sampled
    return wall, (peak - baseline) / 1024, cpu / done * 1e3


# -- 3. judge --------------------------------------------------------------------------


async def judge_calls(origin: str, rollouts: int, calls: int) -> tuple[float, float]:
    """Judge calls/s and CPU microseconds per call of ``score_rubrics`` (4 rubrics)."""
    judge = Judge(model="judge", base_url=f"{origin}/score/v1", auth=StaticBearerAuth("bench"))
    rubrics = [Rubric(f"criterion {k}", f"The answer meets criterion {k}.") for k in range(RUBRICS)]
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
        assert len(rewards) == RUBRICS
        return RUBRICS

    await run_workers(rollouts, rollouts, call)
    wall, cpu, done = await run_workers(rollouts, calls // RUBRICS, call)
    return done / wall, cpu / done * 1e6


# -- 4. start-up -----------------------------------------------------------------------


def _best_wall(command: list[str], repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        best = min(best, time.perf_counter() - started)
    return best


def startup(origin: str) -> dict[str, float]:
    script = str(Path(sys.executable).with_name("benchmax"))
    with tempfile.TemporaryDirectory() as scratch:
        target = f"{HERE / '_harness.py'}:EchoAnswerEnv"
        run = [script, "run", target, "--base-url", f"{origin}/v1", "--model", "m"]
        run += ["-n", "1", "-k", "1", "-o", str(Path(scratch) / "run.jsonl"), "--force"]
        return {
            "python -c pass": _best_wall([sys.executable, "-c", "pass"]),
            "import benchmax.envs": _best_wall([sys.executable, "-c", "import benchmax.envs"]),
            "import benchmax.rewards": _best_wall(
                [sys.executable, "-c", "import benchmax.rewards"]
            ),
            "benchmax --help": _best_wall([script, "--help"]),
            "benchmax run (1 example)": _best_wall(run),
        }


# -- main ------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rollouts", type=int, default=8000, help="per throughput run")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--skip", default="", help="comma-separated: inflight,judge,startup")
    arguments = parser.parse_args()
    skip = set(filter(None, arguments.skip.split(",")))
    logging.disable(logging.WARNING)  # nothing here should log; never measure logging
    failures: list[str] = []
    with fast_server(hold=2.0) as origin:
        concurrency, total = arguments.concurrency, arguments.rollouts
        bare: list[tuple[float, float]] = []
        ours: list[tuple[float, float]] = []
        for _ in range(arguments.repeats):  # interleaved, so load changes hit both alike
            bare.append(asyncio.run(bare_aiohttp(origin, concurrency, total)))
            ours.append(asyncio.run(baseenv_groups(origin, concurrency, total)))
        bare_rate, bare_cpu = max(bare)
        env_rate, env_cpu = max(ours)
        ratio = env_rate / bare_rate
        print(f"== throughput: {concurrency} in flight, {total} per run, best of {len(ours)}")
        print(f"bare aiohttp POST loop : {bare_rate:7.0f} req/s       {bare_cpu:6.0f} us CPU/req")
        print(f"BaseEnv via run_group  : {env_rate:7.0f} rollouts/s  {env_cpu:6.0f} us CPU/rollout")
        print(f"BaseEnv / bare aiohttp : {ratio:7.0%}  (target >= 40%; >= 2,500 rollouts/s)")
        print(f"  runs bare: {_rates(bare)}   BaseEnv: {_rates(ours)}")
        print(f"  before: BaseEnv {BEFORE['baseenv']}; bare httpx {BEFORE['bare httpx']}")
        if ratio < 0.4 or env_rate < 2500:
            failures.append("throughput")

        if "inflight" not in skip:
            wall, growth, cpu_ms = asyncio.run(in_flight(origin, 8000, 1000))
            floor = 8000 / 1000 * 2.0
            print("== in flight: 8,000 rollouts, 1,000 in flight, server holds each 2 s")
            print(f"wall time       : {wall:6.2f} s  = {wall / floor:.2f}x the {floor:g} s floor")
            print(f"peak RSS growth : {growth:6.1f} MB   CPU {cpu_ms:.2f} ms/rollout")
            print(f"  before: {BEFORE['inflight']}; +41 MB for 800 in flight")
            if wall > 1.25 * floor:
                failures.append("inflight")

        if "judge" not in skip:
            judge_runs = [asyncio.run(judge_calls(origin, 64, 4000)) for _ in range(2)]
            rate, cpu = max(judge_runs)
            print("== judge: score_rubrics, 4 rubrics, 64 rollouts in flight")
            print(f"score_rubrics   : {rate:7.0f} calls/s  {cpu:6.0f} us CPU/call")
            print(f"  runs: {_rates(judge_runs)}   before: {BEFORE['judge']}")

        if "startup" not in skip:
            print("== start-up (best of 3 wall times)")
            for name, seconds in startup(origin).items():
                print(f"{name:26}: {seconds:6.2f} s")
    if failures:
        print(f"below target: {', '.join(failures)}")
    return 1 if failures else 0


def _rates(runs: list[tuple[float, Any]]) -> str:
    return ", ".join(f"{rate:.0f}" for rate, _ in runs)


if __name__ == "__main__":
    sys.exit(main())
