"""Overhead of a ``@tool`` call over a hand-written ``run_tool`` (issue 20, "Measure").

Every rollout makes two model calls against an in-process ``MockModelServer`` (no
recording): the first reply calls the ``add`` tool ``--calls`` times, the second answers.
Four environments run the same rollouts, 32 in flight:

* ``hand-written``: ``list_tools`` returns the JSON Schema, ``run_tool`` adds (the 0.2 way;
  arguments are checked against the schema before ``run_tool`` since issue 19 kind 4);
* ``hand-written, no schema``: the same tool advertised without ``parameters`` (nothing
  to check), to show what the schema check costs;
* ``@tool async``: ``tools = (add,)`` with ``async def add(a: int, b: int) -> int``
  (per-rollout table, schema check, pydantic validation and conversion);
* ``@tool sync``: the same function without ``async`` (it runs in a worker thread).

Each measurement runs on a fresh event loop; the order rotates; best of ``--repeats``.
Printed: rollouts/s, process CPU per rollout and the CPU a tool call adds over the
hand-written one.

    uv run python benchmarks/tool_calls.py [--rollouts 640] [--calls 4] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path
from typing import Any

from benchmax.auth import StaticBearerAuth
from benchmax.envs import BaseEnv, BaseRollout, Dataset, Example, RolloutRequest
from benchmax.testing import MockModelServer
from benchmax.tools import tool

IN_FLIGHT = 32
PROMPT = [{"role": "user", "content": "add"}]
SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}


class AddEnv(BaseEnv):
    reward_keys = ("tool_messages",)
    max_turns = 2

    async def create_dataset(
        self, split: Any, base_dir: Path, *, max_examples: int | None = None
    ) -> Dataset[dict[str, Any]]:
        return Dataset([Example(id="e", payload={"prompt_messages": PROMPT})])

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        return {"tool_messages": float(sum(m["role"] == "tool" for m in rollout.messages))}


class HandWritten(AddEnv):
    schema: dict[str, Any] | None = SCHEMA

    async def list_tools(self) -> list[Any]:
        function: dict[str, Any] = {"name": "add", "description": "Add two integers."}
        if self.schema is not None:
            function["parameters"] = self.schema
        return [{"type": "function", "function": function}]

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        if tool_name != "add":
            raise ValueError(f"Unknown tool: {tool_name}")
        return tool_args["a"] + tool_args["b"]


class HandWrittenNoSchema(HandWritten):
    schema = None


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(name="add")
def add_sync(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class AsyncTool(AddEnv):
    tools = (add,)


class SyncTool(AddEnv):
    tools = (add_sync,)


ENVS: dict[str, type[AddEnv]] = {
    "hand-written": HandWritten,
    "hand-written, no schema": HandWrittenNoSchema,
    "@tool async": AsyncTool,
    "@tool sync (thread)": SyncTool,
}


def policy_for(calls: int) -> Any:
    reply = {"tool_calls": [{"name": "add", "arguments": {"a": i, "b": 1}} for i in range(calls)]}

    def policy(body: dict[str, Any]) -> Any:
        return "done" if body["messages"][-1]["role"] == "tool" else reply

    return policy


async def measure(env_class: type[AddEnv], rollouts: int, calls: int) -> tuple[float, float]:
    """(rollouts/s, CPU seconds per rollout) for ``rollouts`` rollouts, 32 in flight."""
    env = env_class()
    async with MockModelServer(policy_for(calls), record=False) as server:
        auth = StaticBearerAuth("bench")
        example = Example(id="e", payload={"prompt_messages": PROMPT})
        gate = asyncio.Semaphore(IN_FLIGHT)

        async def one(index: int) -> None:
            async with gate:
                rollout_id = f"r{index}"
                outcome = await env.run_rollout(
                    RolloutRequest(
                        rollout_id=rollout_id,
                        example=example,
                        model="m",
                        base_url=server.session_url(rollout_id),
                        model_auth=auth,
                    )
                )
                assert outcome.termination_reason == "finished", outcome.termination_reason
                assert outcome.rewards == {"tool_messages": float(calls)}

        await asyncio.gather(*(one(i) for i in range(IN_FLIGHT)))  # warm-up
        cpu, started = time.process_time(), time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(rollouts)))
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    await env.aclose()
    return rollouts / wall, cpu / rollouts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rollouts", type=int, default=640)
    parser.add_argument("--calls", type=int, default=4, help="tool calls per rollout")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    best: dict[str, tuple[float, float]] = {}
    names = list(ENVS)
    for repeat in range(args.repeats):
        order = names[repeat % len(names) :] + names[: repeat % len(names)]
        for name in order:
            rate, cpu = asyncio.run(measure(ENVS[name], args.rollouts, args.calls))
            if name not in best or rate > best[name][0]:
                best[name] = (rate, cpu)
    base_cpu = best["hand-written"][1]
    print(
        f"{args.rollouts} rollouts x {args.calls} tool calls, {IN_FLIGHT} in flight, "
        f"best of {args.repeats}"
    )
    print(f"{'environment':<26} {'rollouts/s':>10} {'CPU/rollout':>12} {'+CPU/tool call':>15}")
    for name in names:
        rate, cpu = best[name]
        extra = (cpu - base_cpu) / args.calls * 1e6
        print(f"{name:<26} {rate:>10.0f} {cpu * 1e6:>10.0f}us {extra:>+13.0f}us")


if __name__ == "__main__":
    main()
