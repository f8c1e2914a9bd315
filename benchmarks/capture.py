"""Capture endpoint benchmarks (issue 37): added latency, CPU per call, throughput, memory.

A keep-alive server with canned vLLM-shaped token replies (``_token_server.py``, 16
completion and 64 prompt tokens: the cost measured is the endpoint's, not JSON size) runs in
its own process. A load generator, also in its own process (as agent programs are), sends
calls with one aiohttp session per agent, either straight to the server (asking for token
ids, as capture does: **direct**) or through a ``CaptureEndpoint`` in this process, each
agent with its own session (base URL and key), every call recorded with its tokens
(**captured**). Printed:

1. **added latency**: one agent calling in sequence, the median time of a call direct and
   captured, and their difference (what a rollout waits for per model call);
2. **CPU per call** of each process (load generator, endpoint, server), read from the
   kernel's accounting (``time.process_time``, ``/proc/PID/stat``): the endpoint's is its
   cost, stable on a busy machine where rates are not (target <= 1 ms);
3. **throughput** at ``--agents`` in flight, direct and captured, and what the CPU figures
   allow: each process is one thread (at most one core's worth of calls) and together they
   have the machine's cores, so the rate cannot pass ``1 / max(each process's CPU per call,
   their sum / cores)``; the ratio of those bounds is what the throughput ratio can reach
   however the cores are shared (the issue's target is >= 90%);
   The same with **agents as the example programs are** (the OpenAI SDK, one client per
   agent; direct: the program unchanged, asking for no token fields; captured: through the
   endpoint, every call recorded with its tokens);
4. **throughput against a server that takes time**: ``--slow-agents`` in flight against the
   same server answering after ``--slow-ms`` (an inference server's time per call), direct
   and captured: where the upstream, not the CPU, sets the pace, as in real use;
5. **memory** (Python allocations) of 1,000 live sessions with one recorded call each;
6. with ``--instructions``: the endpoint process's instructions per call under
   ``valgrind --tool=callgrind`` (two runs of different lengths; start-up cancels out), the
   figure to compare versions with on a machine whose load varies.

``--uvloop`` runs the endpoint's event loop on uvloop (installed with the ``litellm`` group's
proxy extra, not a benchmax dependency) instead of asyncio's own, for comparison.

    uv run python benchmarks/capture.py [--agents 256] [--calls 10000] [--instructions] [--uvloop]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import server_process  # noqa: E402

BODY = {"model": "m", "messages": [{"role": "user", "content": "What is 6 * 7?"}]}
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Load:
    """What one load-generator run measured: calls/s, the median and 90th-percentile
    seconds of a call, and the load generator's CPU seconds per call."""

    rate: float
    median: float
    p90: float
    client_cpu: float


async def _load(
    urls_and_keys: list[tuple[str, str]], calls: int, token_fields: bool, sdk: bool = False
) -> None:
    """The load generator: one worker per (url, key), ``calls`` calls in all; prints its
    :class:`Load` as JSON."""
    import aiohttp

    body = dict(BODY)
    if token_fields:
        body.update({"logprobs": True, "return_token_ids": True})
    data = json.dumps(body).encode()
    remaining = calls
    seconds: list[float] = []

    async def sdk_worker(url: str, key: str) -> None:
        """An agent as the example programs are: the OpenAI SDK, its own client."""
        nonlocal remaining
        from openai import AsyncOpenAI

        extra = {"return_token_ids": True} if token_fields else None
        async with AsyncOpenAI(base_url=url, api_key=key, max_retries=0) as client:
            while remaining > 0:
                remaining -= 1
                sent = time.perf_counter()
                await client.chat.completions.create(
                    model=BODY["model"],
                    messages=BODY["messages"],
                    logprobs=True if token_fields else None,
                    extra_body=extra,
                )
                seconds.append(time.perf_counter() - sent)

    async def worker(url: str, key: str) -> None:
        nonlocal remaining
        if sdk:
            return await sdk_worker(url, key)
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector) as http:
            while remaining > 0:
                remaining -= 1
                sent = time.perf_counter()
                async with http.post(url + "/chat/completions", data=data, headers=headers) as r:
                    await r.read()
                    assert r.status == 200, r.status
                seconds.append(time.perf_counter() - sent)

    cpu, started = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker(url, key) for url, key in urls_and_keys))
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    ordered = sorted(seconds)
    print(
        json.dumps(
            {
                "rate": calls / wall,
                "median": statistics.median(ordered),
                "p90": ordered[int(0.9 * (len(ordered) - 1))],
                "client_cpu": cpu / calls,
            }
        ),
        flush=True,
    )


def _run_load(
    targets: list[tuple[str, str]], calls: int, token_fields: bool, sdk: bool = False
) -> Load:
    """Run the load generator in its own process (``sdk``: its agents use the OpenAI SDK)."""
    spec = json.dumps(
        {"targets": targets, "calls": calls, "token_fields": token_fields, "sdk": sdk}
    )
    done = subprocess.run(
        [sys.executable, __file__, "--load"], input=spec, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr)
    return Load(**json.loads(done.stdout))


def _process_cpu(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used, from ``/proc/PID/stat``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


@dataclass(frozen=True)
class Measured:
    """One load run: the load generator's figures, and the CPU seconds per call of the
    server and (captured runs) of the endpoint."""

    load: Load
    server_cpu: float
    endpoint_cpu: float = 0.0


def _direct(upstream: str, server_pid: int, agents: int, calls: int, sdk: bool = False) -> Measured:
    server = _process_cpu(server_pid)
    load = _run_load([(upstream, "sk-bench")] * agents, calls, True, sdk)
    return Measured(load, (_process_cpu(server_pid) - server) / calls)


async def _captured(
    upstream: str, server_pid: int, agents: int, calls: int, sdk: bool = False
) -> Measured:
    """The same load through the endpoint (this process)."""
    from benchmax.auth import StaticBearerAuth
    from benchmax.capture import CaptureEndpoint

    async with CaptureEndpoint() as endpoint:
        sessions = [
            endpoint.open_session(
                rollout_id=f"r{i}",
                model="m",
                upstream_url=upstream,
                upstream_auth=StaticBearerAuth("sk-bench"),
            )
            for i in range(agents)
        ]
        targets = [(s.base_url, s.api_key) for s in sessions]
        cpu, server = time.process_time(), _process_cpu(server_pid)
        load = await asyncio.to_thread(_run_load, targets, calls, False, sdk)
        cpu, server = time.process_time() - cpu, _process_cpu(server_pid) - server
        recorded = sum(len(s.calls) for s in sessions)
        assert recorded == calls, (recorded, calls)
    return Measured(load, server / calls, cpu / calls)


async def _memory(upstream: str, live: int) -> float:
    """MB allocated (tracemalloc) for ``live`` open sessions with one recorded call each."""
    import aiohttp

    from benchmax.auth import StaticBearerAuth
    from benchmax.capture import CaptureEndpoint

    async with CaptureEndpoint() as endpoint, aiohttp.ClientSession() as http:
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        sessions = [
            endpoint.open_session(
                rollout_id=f"m{i}",
                model="m",
                upstream_url=upstream,
                upstream_auth=StaticBearerAuth("sk-bench"),
            )
            for i in range(live)
        ]
        for session in sessions:
            headers = {"Authorization": f"Bearer {session.api_key}"}
            async with http.post(
                session.base_url + "/chat/completions", json=BODY, headers=headers
            ) as r:
                await r.read()
        gc.collect()
        grown = (tracemalloc.get_traced_memory()[0] - before) / 1e6
        tracemalloc.stop()
        assert all(len(s.calls) == 1 for s in sessions)
    return grown


def _run[T](coroutine: Coroutine[Any, Any, T]) -> T:
    """Run the endpoint's side: on asyncio's loop, or uvloop's with ``BENCH_UVLOOP=1``."""
    if os.environ.get("BENCH_UVLOOP") == "1":
        import uvloop

        return asyncio.run(coroutine, loop_factory=uvloop.new_event_loop)
    return asyncio.run(coroutine)


def _instructions_per_call(upstream: str, agents: int, calls: int) -> float:
    """Instructions the endpoint process executes per call, under callgrind: runs of
    ``calls`` and ``3 * calls`` calls, the difference over ``2 * calls``."""
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (apt-get install valgrind)")
    counts = []
    for n in (calls, 3 * calls):
        with tempfile.TemporaryDirectory() as scratch:
            out = Path(scratch) / "callgrind.out"
            subprocess.run(
                [
                    "valgrind",
                    "--tool=callgrind",
                    f"--callgrind-out-file={out}",
                    sys.executable,
                    __file__,
                    "--endpoint-only",
                    upstream,
                    "--agents",
                    str(agents),
                    "--calls",
                    str(n),
                ],
                check=True,
                capture_output=True,
            )
            found = re.search(r"^summary: (\d+)", out.read_text(), re.MULTILINE)
            assert found is not None, "no summary line in callgrind's output"
            counts.append(int(found.group(1)))
    return (counts[1] - counts[0]) / (2 * calls)


def _load_average() -> str:
    return " / ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=256)
    parser.add_argument("--calls", type=int, default=10000)
    parser.add_argument("--latency-calls", type=int, default=500)
    parser.add_argument("--live", type=int, default=1000)
    parser.add_argument("--slow-agents", type=int, default=256)
    parser.add_argument("--slow-ms", type=float, default=1000.0)
    parser.add_argument("--slow-calls", type=int, default=2560)
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="also count the endpoint's instructions per call under valgrind (minutes)",
    )
    parser.add_argument(
        "--uvloop",
        action="store_true",
        help="run the endpoint's event loop on uvloop (when installed), for comparison",
    )
    parser.add_argument("--json", type=Path, default=None, help="add the figures to this file")
    parser.add_argument("--load", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--endpoint-only", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.load:
        spec = json.loads(sys.stdin.read())
        targets = [tuple(t) for t in spec["targets"]]
        asyncio.run(_load(targets, spec["calls"], spec["token_fields"], spec["sdk"]))  # type: ignore[arg-type]
        return
    if args.endpoint_only is not None:  # the process callgrind counts
        _run(_captured(args.endpoint_only, os.getpid(), args.agents, args.calls))
        return
    if args.uvloop:
        os.environ["BENCH_UVLOOP"] = "1"  # this process and callgrind's endpoint process
    started_load = _load_average()
    pids: list[int] = []
    with server_process(
        [str(HERE / "_token_server.py"), "--tokens", "16", "--prompt", "64"], pids
    ) as origin:
        upstream, server_pid = origin + "/v1", pids[0]
        # one agent calling in sequence: the time a rollout waits per call
        alone_direct = _direct(upstream, server_pid, 1, args.latency_calls)
        alone = _run(_captured(upstream, server_pid, 1, args.latency_calls))
        direct = _direct(upstream, server_pid, args.agents, args.calls)
        captured = _run(_captured(upstream, server_pid, args.agents, args.calls))
        sdk_direct = _direct(upstream, server_pid, args.agents, args.calls, sdk=True)
        sdk = _run(_captured(upstream, server_pid, args.agents, args.calls, sdk=True))
        grown = _run(_memory(upstream, args.live))
        instructions = _instructions_per_call(upstream, 8, 500) if args.instructions else None
    slow_pids: list[int] = []
    with server_process(
        [
            str(HERE / "_token_server.py"),
            *("--tokens", "16", "--prompt", "64", "--delay-ms", str(args.slow_ms)),
        ],
        slow_pids,
    ) as origin:
        slow_upstream = origin + "/v1"
        slow_direct = _direct(slow_upstream, slow_pids[0], args.slow_agents, args.slow_calls)
        slow = _run(_captured(slow_upstream, slow_pids[0], args.slow_agents, args.slow_calls))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    figures = _figures(args, alone_direct, alone, direct, captured, grown, instructions)
    figures.insert(
        -1,
        (
            f"throughput, {args.agents} agents using the OpenAI SDK (as the example programs do)",
            f"{sdk_direct.load.rate:,.0f} calls/s direct, {sdk.load.rate:,.0f} captured"
            f" ({sdk.load.rate / sdk_direct.load.rate:.0%} of direct); load generator CPU"
            f" {sdk.load.client_cpu * 1000:.3f} ms/call, endpoint {sdk.endpoint_cpu * 1000:.3f}",
            ">= 90%",
        ),
    )
    figures.insert(
        -1,
        (
            f"throughput, {args.slow_agents} agents, server answering after {args.slow_ms:g} ms",
            f"{slow_direct.load.rate:,.0f} calls/s direct, {slow.load.rate:,.0f} captured"
            f" ({slow.load.rate / slow_direct.load.rate:.0%} of direct)",
            ">= 90%",
        ),
    )
    print(
        f"cpus: {os.cpu_count()}, load average {started_load} at the start,"
        f" {_load_average()} at the end"
    )
    for name, value, target in figures:
        print(f"{name}: {value}" + (f" (target {target})" if target else ""))
    print(f"peak RSS {peak:.0f} MB")
    if args.json is not None:
        _record(args, figures, started_load)


def _figures(
    args: argparse.Namespace,
    alone_direct: Measured,
    alone: Measured,
    direct: Measured,
    captured: Measured,
    grown: float,
    instructions: float | None,
) -> list[tuple[str, str, str]]:
    """(measure, result, target) rows."""
    ms = 1000
    added = alone.load.median - alone_direct.load.median
    client, server, endpoint = (
        captured.load.client_cpu,
        captured.server_cpu,
        captured.endpoint_cpu,
    )
    cores = os.cpu_count() or 1
    # Each process runs on one core at most, and together on ``cores`` at most.
    direct_most = 1 / max(direct.load.client_cpu, direct.server_cpu, (client + server) / cores)
    captured_most = 1 / max(client, endpoint, server, (client + endpoint + server) / cores)
    rows = [
        (
            "added latency per call, one agent",
            f"{added * ms:.2f} ms (median {alone_direct.load.median * ms:.2f} ms direct,"
            f" {alone.load.median * ms:.2f} ms captured)",
            "",
        ),
        ("endpoint CPU per call, one agent", f"{alone.endpoint_cpu * ms:.3f} ms", "<= 1 ms"),
        (
            f"endpoint CPU per call, {args.agents} agents",
            f"{endpoint * ms:.3f} ms",
            "<= 1 ms",
        ),
        (
            f"CPU per call, {args.agents} agents: load generator / server",
            f"{client * ms:.3f} ms / {server * ms:.3f} ms"
            f" (direct: {direct.load.client_cpu * ms:.3f} ms / {direct.server_cpu * ms:.3f} ms)",
            "",
        ),
        (
            f"throughput, {args.agents} agents",
            f"{direct.load.rate:,.0f} calls/s direct, {captured.load.rate:,.0f} captured"
            f" ({captured.load.rate / direct.load.rate:.0%} of direct)",
            ">= 90%",
        ),
        (
            f"what the CPU per call allows on {cores} cores",
            f"{direct_most:,.0f} calls/s direct, {captured_most:,.0f} captured"
            f" ({captured_most / direct_most:.0%})",
            "",
        ),
        (
            f"memory of {args.live:,} live sessions, one call each",
            f"{grown:.1f} MB",
            "",
        ),
    ]
    if instructions is not None:
        rows.insert(3, ("endpoint instructions per call (callgrind)", f"{instructions:,.0f}", ""))
    return rows


def _record(args: argparse.Namespace, figures: list[tuple[str, str, str]], load: str) -> None:
    from _results import record, table

    record(
        args.json,
        title="The capture endpoint",
        about=ABOUT,
        tables=[
            table(
                ["measure", "result", "target"],
                [list(row) for row in figures],
                caption=f"{args.agents} agents in flight, {args.calls:,} calls"
                f" (load average {load} at the start):",
            )
        ],
        notes=NOTES,
    )


ABOUT = (
    "Agent programs call the model through the capture endpoint (docs/agents.md). A load"
    " generator in its own process (as agent programs are) calls a keep-alive server with"
    " canned vLLM-shaped token replies (16 completion tokens, its own process): straight to"
    " the server (asking for token ids, as capture does), then through a `CaptureEndpoint` in"
    " the benchmark's process with one session per agent, every call recorded with its"
    " tokens. Added latency: one agent calling in sequence, median call direct and captured."
    " CPU per call: each process's own CPU time from the kernel's accounting, the figure that"
    " stays put when the machine is busy. Throughput: `--agents` in flight, against that server"
    " and against the same server answering after `--slow-ms`. Memory: 1,000 open"
    " sessions with one recorded call each (tracemalloc)."
)

NOTES = (
    "Two kinds of load at 256 agents against the instant local server. (1) A lean aiohttp"
    " client, one process for all agents, at about 0.17 ms of CPU per call: the endpoint"
    " (about 0.2 ms per call: an HTTP server's and an HTTP client's work plus decoding and"
    " checking the exact tokens) costs more than the client, so on 2 cores the captured rate"
    ' cannot pass the row "what the CPU per call allows" (each process on one core at'
    " most, and a call costs client + endpoint + server CPU instead of client + server):"
    " >= 90% of direct is out of reach for this client in Python (a bare asyncio proxy"
    " already costs 190K instructions per call, 358K with the JSON decode and encode). (2)"
    " Agents as the example programs are: the OpenAI SDK, one client per agent, about 2 ms of"
    " CPU per call; direct is the program unchanged (no token fields), captured is the same"
    " program through the endpoint with every call recorded with its tokens: >= 90% of"
    " direct. Where the upstream sets the pace, as an inference server does (tens of"
    " milliseconds to seconds of GPU time per call), the endpoint's fraction of a"
    " millisecond is all it adds: the row with a server answering after `--slow-ms`."
)


if __name__ == "__main__":
    main()
