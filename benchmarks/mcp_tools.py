"""MCP tool servers: what a tool call through ``MCPServer`` costs over a plain ``@tool``
function, and whether processes and file descriptors return to baseline after many
per-rollout sessions.

    uv run python benchmarks/mcp_tools.py [--rollouts 256] [--calls 4] [--lifecycle 1000]
        [--stdio-lifecycle 100] [--skip throughput,wrapper,lifecycle]

1. **throughput**, 32 rollouts in flight, each making ``--calls`` tool calls (one per turn,
   ``add``) and then answering, against an in-process ``MockModelServer``: the tool as a
   ``@tool`` function, and the same tool on an MCP server (``_mcp_server.py``, written with
   the SDK) over stdio and over streamable HTTP, one shared session each, and over HTTP with
   a session per rollout. Printed: rollouts/s, client CPU per rollout, mean latency of one
   tool call as ``BaseEnv.run_tool`` sees it, and its overhead over the ``@tool`` call.
2. **wrapper**: 500 sequential calls over stdio, through the SDK's ``Client`` directly and
   through an ``MCPServer`` session (its owner task, future and result mapping): what
   benchmax adds to the SDK's own cost, per call.
3. **lifecycle**: ``--lifecycle`` rollouts with a session per rollout over HTTP (32 in
   flight) and ``--stdio-lifecycle`` with a server process per rollout over stdio (8 in
   flight; each start costs a Python interpreter importing the SDK, 1-2 s of CPU): open file
   descriptors and child processes before, at their peak and after.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _harness import run_workers, server_process

from benchmax.auth import StaticBearerAuth
from benchmax.envs import BaseEnv, BaseRollout, Dataset, Example, RolloutRequest
from benchmax.testing import MockModelServer
from benchmax.tools import MCPServer, tool

HERE = Path(__file__).resolve().parent
SERVER = HERE / "_mcp_server.py"
EXAMPLE = Example(id="e", payload={"prompt_messages": [{"role": "user", "content": "add"}]})


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class AddEnv(BaseEnv):
    """Reward 1.0 when the final answer is the last tool result; times every tool call."""

    reward_keys = ("correct",)
    max_turns = 64

    def __init__(self, tools: Sequence[Any]) -> None:
        super().__init__(tools=tools)
        self.latencies: list[float] = []

    async def create_dataset(
        self, split: Any, base_dir: Path, *, max_examples: int | None = None
    ) -> Dataset[dict[str, Any]]:
        return Dataset([EXAMPLE])

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        started = time.perf_counter()
        try:
            return await super().run_tool(rollout_id, tool_name, **tool_args)
        finally:
            self.latencies.append(time.perf_counter() - started)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        results = [m["content"] for m in rollout.messages if m["role"] == "tool"]
        return {"correct": float(bool(results) and rollout.messages[-1]["content"] == results[-1])}


def calling_policy(calls: int) -> Any:
    def policy(body: dict[str, Any]) -> Any:
        results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
        if len(results) >= calls:
            return str(results[-1])
        arguments = {"a": len(results), "b": 1}
        return {"content": None, "tool_calls": [{"name": "add", "arguments": arguments}]}

    return policy


async def rollouts(
    tools: Sequence[Any], calls: int, total: int, in_flight: int, probe: Probe | None = None
) -> tuple[float, float, list[float]]:
    """Run ``total`` rollouts, ``in_flight`` at a time; (wall s, CPU s, tool latencies)."""
    async with MockModelServer(calling_policy(calls), record=False) as model:
        env = AddEnv(tools)
        numbers = iter(range(total))

        async def one() -> int:
            request = RolloutRequest(
                rollout_id=f"r{next(numbers)}",
                example=EXAMPLE,
                model="bench",
                base_url=model.base_url,
                model_auth=StaticBearerAuth("bench"),
            )
            rollout = await env.run_rollout(request)
            if rollout.termination_reason != "finished" or rollout.rewards != {"correct": 1.0}:
                raise RuntimeError(f"rollout failed: {rollout.termination_reason}")
            if probe is not None:
                probe.sample()
            return 1

        wall, cpu, done = await run_workers(in_flight, total, one)
        assert done == total
        await env.aclose()
        for entry in tools:
            if isinstance(entry, MCPServer):
                await entry.aclose()
    return wall, cpu, env.latencies


class Probe:
    """Open file descriptors and child processes of this process, with their peaks."""

    def __init__(self) -> None:
        self.fds, self.children = _fds(), _children()
        self.peak_fds, self.peak_children = self.fds, self.children

    def sample(self) -> None:
        self.peak_fds = max(self.peak_fds, _fds())
        self.peak_children = max(self.peak_children, _children())


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _children() -> int:
    me = str(os.getpid())
    count = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "stat").read_text().rsplit(")", 1)[1].split()[1] == me:
                    count += 1
            except (FileNotFoundError, ProcessLookupError):
                continue
    return count


def stdio(shared: bool) -> MCPServer:
    return MCPServer(command=[sys.executable, str(SERVER)], shared=shared, startup_timeout=120)


def http(url: str, shared: bool) -> MCPServer:
    return MCPServer(url=url, shared=shared, startup_timeout=120)


def throughput(url: str, total: int, calls: int) -> None:
    arms: list[tuple[str, Sequence[Any]]] = [
        ("@tool function", [add]),
        ("MCP stdio, shared session", [stdio(shared=True)]),
        ("MCP HTTP, shared session", [http(url, shared=True)]),
        ("MCP HTTP, session per rollout", [http(url, shared=False)]),
    ]
    print(f"\nthroughput: {total} rollouts x {calls} tool calls, 32 in flight")
    print("| tools | rollouts/s | CPU ms/rollout | ms/tool call | overhead vs @tool |")
    print("| --- | --- | --- | --- | --- |")
    baseline: float | None = None
    for name, tools in arms:
        asyncio.run(rollouts(tools, calls, 32, 32))  # warm-up: starts, imports, pools
        wall, cpu, latencies = asyncio.run(rollouts(tools, calls, total, 32))
        latency = sum(latencies) / len(latencies) * 1000
        baseline = latency if baseline is None else baseline
        overhead = "" if latency == baseline else f"+{latency - baseline:.2f} ms"
        print(
            f"| {name} | {total / wall:,.0f} | {cpu / total * 1000:.1f} | {latency:.2f} | "
            f"{overhead} |"
        )


async def sequential_calls(calls: int) -> tuple[float, float, float, float]:
    """Per ``add`` call, wall ms and client CPU ms: the SDK's ``Client``, then an
    ``MCPServer`` session."""
    from mcp import Client, StdioServerParameters

    arguments = {"a": 1, "b": 2}
    parameters = StdioServerParameters(command=sys.executable, args=[str(SERVER)])
    async with Client(parameters) as client:
        await client.list_tools()
        for _ in range(50):
            await client.call_tool("add", arguments)
        started, cpu = time.perf_counter(), time.process_time()
        for _ in range(calls):
            await client.call_tool("add", arguments)
        raw = (time.perf_counter() - started) / calls * 1000
        raw_cpu = (time.process_time() - cpu) / calls * 1000
    session = await stdio(shared=False).open_session("bench")
    try:
        await session.list_tools()
        for _ in range(50):
            await session.call_tool("add", arguments)
        started, cpu = time.perf_counter(), time.process_time()
        for _ in range(calls):
            await session.call_tool("add", arguments)
        wrapped = (time.perf_counter() - started) / calls * 1000
        wrapped_cpu = (time.process_time() - cpu) / calls * 1000
    finally:
        await session.aclose()
    return raw, wrapped, raw_cpu, wrapped_cpu


def wrapper(calls: int = 500) -> None:
    raw, wrapped, raw_cpu, wrapped_cpu = asyncio.run(sequential_calls(calls))
    print(f"\nwrapper: {calls} sequential calls over stdio, per call")
    print("| | SDK Client | MCPServer session | added |\n| --- | --- | --- | --- |")
    print(f"| wall | {raw:.2f} ms | {wrapped:.2f} ms | {wrapped - raw:+.2f} ms |")
    added = wrapped_cpu - raw_cpu
    print(f"| client CPU | {raw_cpu:.2f} ms | {wrapped_cpu:.2f} ms | {added:+.2f} ms |")


def lifecycle(url: str, total: int, stdio_total: int) -> None:
    print("\nlifecycle: a session per rollout, then everything closed")
    print("| sessions | rollouts | in flight | wall s | fds before / peak / after "
          "| child processes before / peak / after |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- |")
    for name, server, count, in_flight in (
        ("HTTP", http(url, shared=False), total, 32),
        ("stdio", stdio(shared=False), stdio_total, 8),
    ):
        if count == 0:
            continue
        probe = Probe()
        wall, _, _ = asyncio.run(rollouts([server], 1, count, in_flight, probe))
        time.sleep(1.0)  # sockets the server side closes last
        print(
            f"| {name} | {count:,} | {in_flight} | {wall:.1f} | "
            f"{probe.fds} / {probe.peak_fds} / {_fds()} | "
            f"{probe.children} / {probe.peak_children} / {_children()} |"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rollouts", type=int, default=256)
    parser.add_argument("--calls", type=int, default=4)
    parser.add_argument("--lifecycle", type=int, default=1000)
    parser.add_argument("--stdio-lifecycle", type=int, default=100)
    parser.add_argument("--skip", default="", help="comma-separated: throughput,wrapper,lifecycle")
    options = parser.parse_args()
    skip = set(filter(None, options.skip.split(",")))
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    with server_process([str(SERVER), "http"]) as url:
        if "throughput" not in skip:
            throughput(url, options.rollouts, options.calls)
        if "wrapper" not in skip:
            wrapper()
        if "lifecycle" not in skip:
            lifecycle(url, options.lifecycle, options.stdio_lifecycle)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
