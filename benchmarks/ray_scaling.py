"""Ray scaling: rollouts/s when the rollouts burn CPU in a tool, by number of Ray workers.

Every rollout asks the mock model, which calls the ``work`` tool once (a pure-Python loop
holding the GIL for ``--tool-ms`` milliseconds on an idle core), then answers. In one
process the tools of all groups share one core; Ray workers are processes, so throughput
can grow with workers up to the machine's cores. The script starts one local Ray instance
(``ray.init``, no dashboard) and runs the same split in this process, then with 1, 2 and 4
workers; the mock model runs in this (driver) process throughout.

Throughput is counted from the moment the workers are ready to the last finished group, so
worker start-up (process launch, imports, bundle load: several seconds on a loaded machine)
shows only in the wall time.

    uv run python benchmarks/ray_scaling.py [--examples 48] [--group-size 4] [--tool-ms 50]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import logging
import os
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from benchmax.auth import StaticBearerAuth
from benchmax.envs import BaseEnv, BaseRollout, Dataset, DatasetSplit, Example, Tool
from benchmax.runner import RayExecutor, RunConfig, run_environment
from benchmax.testing import MockModelServer, RecordedRequest

_WORK_TOOL: Tool = {
    "type": "function",
    "function": {
        "name": "work",
        "description": "Crunch numbers for a while.",
        "parameters": {
            "type": "object",
            "properties": {"seed": {"type": "integer"}},
            "required": ["seed"],
            "additionalProperties": False,
        },
    },
}


def calibrate(milliseconds: float) -> int:
    """Loop iterations of ``crunch`` that take about ``milliseconds`` here."""
    began = time.perf_counter()
    crunch(0, 200_000)
    per_iteration = (time.perf_counter() - began) / 200_000
    return max(1, int(milliseconds / 1000 / per_iteration))


def crunch(seed: int, iterations: int) -> int:
    value = seed
    for i in range(iterations):
        value = (value * 1_103_515_245 + i) % 2_147_483_648
    return value


class CrunchEnv(BaseEnv):
    """One tool call that burns CPU, then an answer; reward 1.0 when the tool ran."""

    reward_keys = ("worked",)
    max_turns = 3

    def __init__(self, count: int, iterations: int) -> None:
        super().__init__()
        self.count = count
        self.iterations = iterations

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> Dataset[dict[str, Any]]:
        prompt = [{"role": "user", "content": "Crunch, then say done."}]
        return Dataset(
            [
                Example(id=f"ex-{i}", payload={"prompt_messages": prompt, "seed": i})
                for i in range(self.count)
            ]
        )

    async def list_tools(self) -> list[Tool]:
        return [_WORK_TOOL]

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        return {"value": crunch(int(tool_args["seed"]), self.iterations)}

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        tools = [str(m["content"]) for m in rollout.messages if m["role"] == "tool"]
        return {"worked": float(any('"value"' in content for content in tools))}


def policy(body: dict[str, Any], request: RecordedRequest) -> dict[str, Any] | str:
    """Call ``work`` once, then answer."""
    if any(message["role"] == "tool" for message in body["messages"]):
        return "done"
    return {"content": None, "tool_calls": [{"name": "work", "arguments": {"seed": 7}}]}


class _Timed:
    """Wraps an executor to note when its workers are ready (start-up is not throughput)."""

    def __init__(self, inner: RayExecutor) -> None:
        self.inner = inner
        self.ready: float | None = None

    @contextlib.asynccontextmanager
    async def open(self, env: Any, config: RunConfig, run_id: str) -> AsyncIterator[Any]:
        async with self.inner.open(env, config, run_id) as dispatch:
            self.ready = time.perf_counter()
            yield dispatch


async def measure(
    env: CrunchEnv, config: RunConfig, executor: RayExecutor | None
) -> tuple[float, float, int]:
    """(rollouts/s once the workers are ready, wall seconds, groups) for one fresh run."""
    last: list[float] = []
    timed = None if executor is None else _Timed(executor)
    began = time.perf_counter()
    report = await run_environment(
        env, config, on_progress=lambda _: last.append(time.perf_counter()), executor=timed
    )
    wall = time.perf_counter() - began
    ready = began if timed is None or timed.ready is None else timed.ready
    return report.rollouts_run / (last[-1] - ready), wall, report.groups


async def main(examples: int, group_size: int, tool_ms: float, workers: list[int]) -> None:
    iterations = calibrate(tool_ms)
    env_args = {"count": examples, "iterations": iterations}
    async with MockModelServer(policy, record=False) as server:
        base = RunConfig(
            model="mock-model",
            base_url=f"{server.origin}/sessions/{{rollout_id}}/v1",
            model_auth=StaticBearerAuth("bench"),
            group_size=group_size,
            max_concurrent_groups=8,
        )
        with tempfile.TemporaryDirectory() as directory:
            rows: list[tuple[str, float, float]] = []

            async def one(label: str, executor: RayExecutor | None) -> None:
                config = _replace(base, output=Path(directory) / f"{label}.jsonl")
                steady, wall, groups = await measure(CrunchEnv(**env_args), config, executor)
                assert groups == examples
                rows.append((label, steady, wall))
                print(f"{label:>16}: {steady:6.1f} rollouts/s (wall {wall:5.1f} s)", flush=True)

            await one("in-process", None)
            for count in workers:
                executor = RayExecutor(
                    workers=count, worker_concurrency=4, constructor_args=env_args
                )
                await one(f"ray {count} worker{'s' if count > 1 else ''}", executor)
    baseline = rows[1][1]
    print(f"\n{examples} examples x {group_size} rollouts, tool {tool_ms:.0f} ms, "
          f"{os.cpu_count()} cores")  # fmt: skip
    print("| workers | rollouts/s | vs 1 worker | wall s (with start-up) |")
    print("| --- | --- | --- | --- |")
    for label, steady, wall in rows:
        print(f"| {label} | {steady:.1f} | {steady / baseline:.2f}x | {wall:.1f} |")


def _replace(config: RunConfig, **changes: Any) -> RunConfig:
    return dataclasses.replace(config, **changes)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=48)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--tool-ms", type=float, default=50.0)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    options = parser.parse_args()
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    import ray_scaling  # this file under its module name, so the bundle captures it

    import ray

    logging.getLogger("benchmax.bundle").setLevel(logging.ERROR)  # "auto-bundling ..." notes
    ray.init(include_dashboard=False, logging_level=logging.WARNING)
    try:
        asyncio.run(
            ray_scaling.main(options.examples, options.group_size, options.tool_ms, options.workers)
        )
    finally:
        ray.shutdown()
