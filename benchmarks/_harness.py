"""What the benchmark scripts share: a mock server in its own process, worker loops,
the bare httpx baseline and a one-call BaseEnv.

Each script is run as ``uv run python benchmarks/<script>.py``, so this module is
importable as ``_harness`` from the script's directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx

from benchmax.envs import BaseEnv, BaseRollout, Dataset, Example, _connection_pool

_HERE = str(Path(__file__).resolve().parent)
PROMPT = [{"role": "user", "content": "42"}]
EXAMPLE = Example(id="e", payload={"prompt_messages": PROMPT, "answer": "42"})


class EchoAnswerEnv(BaseEnv):
    """One model call; reward 1.0 when the reply is the expected answer."""

    reward_keys = ("correct",)
    max_turns = 1

    async def create_dataset(
        self, split: Any, base_dir: Path, *, max_examples: int | None = None
    ) -> Dataset[dict[str, Any]]:
        return Dataset([EXAMPLE])

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        content = rollout.messages[-1]["content"]
        return {"correct": 1.0 if content == rollout.example_args["answer"] else 0.0}


@contextlib.contextmanager
def mock_server_process(policy: str, env: Mapping[str, str] | None = None) -> Iterator[str]:
    """Run ``python -m benchmax.testing`` with ``policy`` in its own process; yield its base URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmax.testing", "--no-record", "--policy", policy],
        stdout=subprocess.PIPE,
        text=True,
        env={
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            # Policies named as ``benchmarks/<script>.py:fn`` import ``_harness`` too.
            "PYTHONPATH": os.pathsep.join(filter(None, [_HERE, os.environ.get("PYTHONPATH")])),
            **(env or {}),
        },
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if "listening on" not in line:
            raise RuntimeError(f"mock server did not start: {line!r}")
        yield line.rsplit(" ", 1)[-1].strip()
    finally:
        process.terminate()
        process.wait(10)


async def run_workers(workers: int, units: int, unit: Callable[[], Awaitable[int]]) -> float:
    """Run ``units`` units of work on ``workers`` workers; return completions per second.

    Each call of ``unit`` returns how many completions it made (a group of 8 rollouts: 8).
    """
    remaining = units
    done = 0

    async def worker() -> None:
        nonlocal remaining, done
        while remaining > 0:
            remaining -= 1
            completed = await unit()  # not ``done += await ...``: that reads ``done`` first
            done += completed

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(workers)))
    return done / (time.perf_counter() - started)


async def bare_loop(
    base_url: str,
    concurrency: int,
    requests: int,
    body: Mapping[str, Any],
    check: Callable[[dict[str, Any]], None],
    *,
    pooled: bool = False,
) -> float:
    """Requests/s of plain httpx posts through one shared client, ``concurrency`` in flight.

    ``pooled=True`` uses a client over the loop's shared transport instead of httpx's own
    connection pool, isolating what the library adds above the wire.
    """
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    client = (
        _connection_pool.pooled_http_client(timeout=60.0)
        if pooled
        else httpx.AsyncClient(limits=limits, timeout=60.0)
    )
    async with client:

        async def post() -> int:
            response = await client.post(
                f"{base_url}/chat/completions", json=body, headers={"Authorization": "Bearer bench"}
            )
            response.raise_for_status()
            check(response.json())
            return 1

        return await run_workers(concurrency, requests, post)


def use_stock_pool() -> None:
    """Measure with httpcore's stock connection pool (the "before" figures)."""
    _connection_pool.install_keep_alive_pool = lambda transport: transport  # type: ignore[assignment]
