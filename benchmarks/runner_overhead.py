"""Runner overhead: rollouts/s through ``run_environment`` vs calling ``run_group`` directly.

Both paths run the same single-turn ``BaseEnv`` (500 examples x 8 rollouts by default)
against an in-process ``MockModelServer`` with the same number of groups in flight. The
direct path is a bare worker pool around ``env.run_group``; the runner path adds everything
``run_environment`` does: the rollout observer (transcripts, timings), log capture, rollout
ids, the JSONL results file written and flushed per group, and the summary.

    uv run python benchmarks/runner_overhead.py [--examples 500] [--group-size 8]
        [--json benchmarks/results/runner_overhead.json]

``--json PATH`` adds the figures to a results file (benchmarks/_results.py), from which
benchmarks/render_performance.py renders docs/performance.md.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _results import record, table

from benchmax.auth import StaticBearerAuth
from benchmax.envs import BaseEnv, BaseRollout, Dataset, DatasetSplit, Example, RolloutRequest
from benchmax.runner import RunConfig, run_environment
from benchmax.testing import MockModelServer, echo


class EchoEnv(BaseEnv):
    reward_keys = ("correct",)
    max_turns = 1

    def __init__(self, count: int) -> None:
        super().__init__()
        self.count = count

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> Dataset[dict[str, Any]]:
        return Dataset(
            [
                Example(
                    id=f"ex-{i}",
                    payload={
                        "prompt_messages": [{"role": "user", "content": f"question {i}"}],
                        "answer": f"question {i}",
                    },
                )
                for i in range(self.count)
            ]
        )

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        reply = rollout.messages[-1]["content"]
        return {"correct": float(reply == rollout.example_args["answer"])}


async def direct(env: EchoEnv, base_url: str, group_size: int, concurrency: int) -> float:
    examples = list(await env.create_dataset("eval", Path(".")))
    items = iter(enumerate(examples))
    auth = StaticBearerAuth("bench")

    async def worker() -> None:
        for index, example in items:
            requests: Sequence[RolloutRequest[Any]] = [
                RolloutRequest(
                    rollout_id=f"d{index}-{k}",
                    example=example,
                    model="m",
                    base_url=base_url,
                    model_auth=auth,
                    split="eval",
                )
                for k in range(group_size)
            ]
            await env.run_group(requests)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return len(examples) * group_size / (time.perf_counter() - started)


async def through_runner(
    env: EchoEnv, base_url: str, group_size: int, concurrency: int, output: Path
) -> float:
    config = RunConfig(
        model="m",
        base_url=base_url,
        model_auth=StaticBearerAuth("bench"),
        group_size=group_size,
        max_concurrent_groups=concurrency,
        output=output,
    )
    started = time.perf_counter()
    report = await run_environment(env, config)
    elapsed = time.perf_counter() - started
    assert report.rollouts_by_reason == {"finished": env.count * group_size}, report
    return report.rollouts / elapsed


async def measure(path: str, examples: int, group_size: int, concurrency: int) -> float:
    """One measurement on a fresh event loop: its own mock server and connection pool."""
    env = EchoEnv(examples)
    try:
        async with MockModelServer(echo, record=False) as server:
            await direct(EchoEnv(concurrency), server.base_url, group_size, concurrency)  # warm up
            if path == "direct":
                return await direct(env, server.base_url, group_size, concurrency)
            with tempfile.TemporaryDirectory() as scratch:
                output = Path(scratch) / "results.jsonl"
                return await through_runner(env, server.base_url, group_size, concurrency, output)
    finally:
        await env.aclose()


def main(
    examples: int, group_size: int, concurrency: int, repeats: int, json_path: Path | None
) -> None:
    best = {"direct": 0.0, "runner": 0.0}
    for attempt in range(repeats):
        order = ("direct", "runner") if attempt % 2 == 0 else ("runner", "direct")
        for path in order:
            rate = asyncio.run(measure(path, examples, group_size, concurrency))
            best[path] = max(best[path], rate)
    total = examples * group_size
    print(f"{examples} examples x {group_size} rollouts = {total}, {concurrency} groups in flight")
    print(f"run_group directly:  {best['direct']:8.1f} rollouts/s")
    print(f"run_environment:     {best['runner']:8.1f} rollouts/s")
    print(f"runner throughput:   {best['runner'] / best['direct']:8.1%} of direct")
    if json_path is not None:
        record(
            json_path,
            title="Runner overhead",
            about=ABOUT,
            tables=[
                table(
                    ["path", "rollouts/s"],
                    [
                        ["`run_group` directly", round(best["direct"], 1)],
                        ["`run_environment`", round(best["runner"], 1)],
                    ],
                    caption=f"{examples} examples x {group_size} rollouts, "
                    f"{concurrency} groups in flight, best of {repeats}:",
                )
            ],
            notes=f"`run_environment` ran at {best['runner'] / best['direct']:.0%} "
            "of the direct path's rate.",
        )


ABOUT = (
    "A single-turn `BaseEnv` against an in-process `MockModelServer` (echo policy), two ways: "
    "a bare worker pool calling `env.run_group` directly, and `benchmax.runner.run_environment` "
    "(rollout observer with transcripts and timings, log capture, rollout ids, JSONL results "
    "written and flushed per group, summary). Each measurement runs on a fresh event loop (its "
    "own server and connection pool); the order alternates; best of the repeats."
)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=500)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2, help="best of N runs of each path")
    parser.add_argument(
        "--json", type=Path, metavar="PATH", help="add the figures to this results file"
    )
    options = parser.parse_args()
    main(options.examples, options.group_size, options.concurrency, options.repeats, options.json)
