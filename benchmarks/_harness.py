"""What the benchmark scripts share: a server in its own process, worker loops and a
one-call BaseEnv.

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
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from benchmax.envs import BaseEnv, BaseRollout, Dataset, Example

HERE = Path(__file__).resolve().parent
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
def server_process(command: Sequence[str], pids: list[int] | None = None) -> Iterator[str]:
    """Run a server that prints ``listening on URL`` in its own process; yield the URL
    (its process id is appended to ``pids`` when given)."""
    process = subprocess.Popen(
        [sys.executable, *command],
        stdout=subprocess.PIPE,
        text=True,
        env={
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])),
        },
    )
    if pids is not None:
        pids.append(process.pid)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if "listening on" not in line:
            raise RuntimeError(f"server did not start: {line!r}")
        yield line.rsplit(" ", 1)[-1].strip()
    finally:
        process.terminate()
        process.wait(10)


def fast_server(hold: float = 2.0) -> contextlib.AbstractContextManager[str]:
    """``_fast_server.py`` in its own process; yields its origin (``http://127.0.0.1:PORT``)."""
    return server_process([str(HERE / "_fast_server.py"), "--hold", str(hold)])


async def run_workers(
    workers: int, units: int, unit: Callable[[], Awaitable[int]]
) -> tuple[float, float, int]:
    """Run ``units`` units of work on ``workers`` workers.

    Returns (wall seconds, process CPU seconds, completions); each call of
    ``unit`` returns how many completions it made (a group of 8 rollouts: 8).
    """
    remaining = units
    done = 0

    async def worker() -> None:
        nonlocal remaining, done
        while remaining > 0:
            remaining -= 1
            completed = await unit()  # not ``done += await ...``: that reads ``done`` first
            done += completed

    cpu, started = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(workers)))
    return time.perf_counter() - started, time.process_time() - cpu, done
