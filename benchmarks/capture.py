"""Capture endpoint benchmarks (issue 37): per-call overhead, throughput, memory.

A keep-alive server with canned vLLM-shaped token replies (``_token_server.py``, 16
completion and 64 prompt tokens: the cost measured is the endpoint's, not JSON size) runs in
its own process. A load generator, also in its own process (as agent programs are), keeps
``--agents`` requests in flight with one aiohttp session per agent:

1. **direct**: the load generator posts straight to the server (asking for token ids, as
   capture does);
2. **captured**: the same load through a ``CaptureEndpoint`` in this process, each agent
   with its own session (base URL and key); every call is recorded with its tokens.

Printed: calls/s of each and their ratio (target >= 90% at 256 agents), the endpoint's
CPU per call in this process (target <= 1 ms), and the memory (Python allocations) of 1,000 live
sessions with one recorded call each.

    uv run python benchmarks/capture.py [--agents 256] [--calls 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import server_process  # noqa: E402

BODY = {"model": "m", "messages": [{"role": "user", "content": "What is 6 * 7?"}]}


async def _load(urls_and_keys: list[tuple[str, str]], calls: int, token_fields: bool) -> None:
    """The load generator: one worker per (url, key), ``calls`` calls in all; prints
    ``rate seconds``."""
    import aiohttp

    body = dict(BODY)
    if token_fields:
        body.update({"logprobs": True, "return_token_ids": True})
    data = json.dumps(body).encode()
    remaining = calls

    async def worker(url: str, key: str) -> None:
        nonlocal remaining
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector) as http:
            while remaining > 0:
                remaining -= 1
                async with http.post(url + "/chat/completions", data=data, headers=headers) as r:
                    await r.read()
                    assert r.status == 200, r.status

    started = time.perf_counter()
    await asyncio.gather(*(worker(url, key) for url, key in urls_and_keys))
    seconds = time.perf_counter() - started
    print(f"{calls / seconds:.1f} {seconds:.3f}", flush=True)


def _run_load(targets: list[tuple[str, str]], calls: int, token_fields: bool) -> float:
    """Run the load generator in its own process; its calls/s."""
    spec = json.dumps({"targets": targets, "calls": calls, "token_fields": token_fields})
    done = subprocess.run(
        [sys.executable, __file__, "--load"], input=spec, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr)
    return float(done.stdout.split()[0])


async def _captured(upstream: str, agents: int, calls: int) -> tuple[float, float]:
    """Calls/s through the endpoint and the endpoint's CPU seconds per call."""
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
        cpu = time.process_time()
        rate = await asyncio.to_thread(_run_load, targets, calls, False)
        cpu = time.process_time() - cpu
        recorded = sum(len(s.calls) for s in sessions)
        assert recorded == calls, (recorded, calls)
    return rate, cpu / calls


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=256)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--live", type=int, default=1000)
    parser.add_argument("--json", type=Path, default=None, help="add the figures to this file")
    parser.add_argument("--load", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.load:
        spec = json.loads(sys.stdin.read())
        targets = [tuple(t) for t in spec["targets"]]
        asyncio.run(_load(targets, spec["calls"], spec["token_fields"]))  # type: ignore[arg-type]
        return
    with server_process(
        [str(HERE / "_token_server.py"), "--tokens", "16", "--prompt", "64"]
    ) as origin:
        upstream = origin + "/v1"
        direct = _run_load([(upstream, "sk-bench")] * args.agents, args.calls, True)
        rate, cpu_per_call = asyncio.run(_captured(upstream, args.agents, args.calls))
        grown = asyncio.run(_memory(upstream, args.live))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"agents in flight: {args.agents}, calls: {args.calls}, cpus: {os.cpu_count()}")
    print(f"direct:   {direct:8.1f} calls/s")
    print(f"captured: {rate:8.1f} calls/s  ({rate / direct:.0%} of direct; target >= 90%)")
    print(f"endpoint CPU per call: {cpu_per_call * 1000:.3f} ms (target <= 1 ms)")
    print(
        f"memory: {grown:.1f} MB for {args.live} live sessions with one call each"
        f" ({grown * 1000 / args.live:.1f} MB per 1,000); peak RSS {peak:.0f} MB"
    )
    if args.json is not None:
        _record(args, direct, rate, cpu_per_call, grown)


def _record(
    args: argparse.Namespace, direct: float, rate: float, cpu_per_call: float, grown: float
) -> None:
    from _results import record, table

    record(
        args.json,
        title="The capture endpoint",
        about=ABOUT,
        tables=[
            table(
                ["measure", "result", "target"],
                [
                    ["direct", f"{direct:,.0f} calls/s", ""],
                    ["captured", f"{rate:,.0f} calls/s ({rate / direct:.0%} of direct)", ">= 90%"],
                    ["endpoint CPU per call", f"{cpu_per_call * 1000:.2f} ms", "<= 1 ms"],
                    [
                        f"memory of {args.live:,} live sessions, one call each",
                        f"{grown:.1f} MB",
                        "",
                    ],
                ],
                caption=f"{args.agents} agents in flight, {args.calls:,} calls:",
            )
        ],
        notes=(
            "Endpoint CPU is this process's (the endpoint's server side, its upstream client"
            " side and the recording). On the shared 2-core machine the endpoint process got"
            " about a fifth of a core during the run, waiting for the CPU the machine's other"
            " work held; under cProfile most of its time is the loopback `send` of the two"
            " extra hops of each call. The throughput ratio is to be measured again on an idle"
            " machine with spare cores."
        ),
    )


ABOUT = (
    "Agent programs call the model through the capture endpoint (docs/agents.md). A load"
    " generator in its own process (as agent programs are) keeps `--agents` calls in flight"
    " against a keep-alive server with canned vLLM-shaped token replies (16 completion tokens,"
    " its own process): straight to the server (asking for token ids, as capture does), then"
    " through a `CaptureEndpoint` in the benchmark's process with one session per agent, every"
    " call recorded with its tokens. Memory: 1,000 open sessions with one recorded call each"
    " (tracemalloc)."
)


if __name__ == "__main__":
    main()
