"""``benchmax serve`` vs openenv-core's own server: concurrent WebSocket sessions at scale.

    uv run python benchmarks/serve_scale.py [--sessions 2048] [--duration 30] [--skip-openenv]

Both servers serve an equivalent trivial environment, each in its own process on
127.0.0.1: an episode is ``reset``, a step that waits 1-10 s (uniform; seeded) and a
final step that ends it with reward 1.0, so 3 requests per episode.

- benchmax: ``WaitEnv`` below (a ``BaseEnv`` whose ``wait`` tool sleeps), run by
  ``benchmax serve --protocol openenv``; the waiting step is a tool call, the final step
  the answer.
- openenv-core: ``WaitEnvironment`` below (``step_async`` sleeps: openenv-core's fastest
  path, no thread pool), served by openenv-core's ``create_fastapi_app`` under uvicorn,
  ``max_concurrent_envs`` = the session count.

A load generator (this process, aiohttp) keeps ``--sessions`` WebSocket sessions busy
for ``--duration`` seconds: each connects, runs one episode, closes, and starts again.
Reported per server: success share (episodes whose every reply was an observation, the
last one done with reward 1.0), requests/s, p99 latency of the requests that do not
wait (reset, final step) and of the waiting step beyond its wait, server CPU seconds,
requests per server CPU-second (requests/s per core fully used) and peak RSS. Then
benchmax alone at growing session counts (x1.5 each time, at most 4 rounds), stopping at
the first count below 100% success or past the open-file limit (each session holds one
descriptor in the server and one in the load generator: a parked model call of a
``BaseEnv`` rollout reaches the policy bridge in-process, without a socket).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmax.envs import BaseEnv, BaseRollout, Dataset, Example

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WAIT_RANGE = (1.0, 10.0)
LOGS = Path(tempfile.gettempdir()) / "benchmax-serve-scale"
"""Each server's output goes to ``LOGS/<server>-<sessions>.log`` (kept for a look)."""


class WaitEnv(BaseEnv):
    """One example; a ``wait`` tool that sleeps; reward 1.0 for any finished episode."""

    reward_keys = ("done",)
    max_turns = 2

    async def create_dataset(
        self, split: Any, base_dir: Path, *, max_examples: int | None = None
    ) -> Dataset[dict[str, Any]]:
        payload = {"prompt_messages": [{"role": "user", "content": "wait, then answer"}]}
        return Dataset([Example(id="wait", payload=payload)])

    async def list_tools(self) -> list[Any]:
        parameters = {
            "type": "object",
            "properties": {"seconds": {"type": "number"}},
            "required": ["seconds"],
        }
        return [{"type": "function", "function": {"name": "wait", "parameters": parameters}}]

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        await asyncio.sleep(float(tool_args["seconds"]))
        return "waited"

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        return {"done": 1.0}


def openenv_server(port: int, sessions: int) -> None:
    """openenv-core's server for the equivalent environment (runs until killed)."""
    import uvicorn
    from openenv.core.env_server.http_server import create_fastapi_app
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, Observation, State

    class WaitAction(Action):
        wait_seconds: float = 0.0

    class WaitObservation(Observation):
        waited: float = 0.0

    class WaitEnvironment(Environment):  # type: ignore[misc]
        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self) -> None:
            super().__init__()
            self._state = State(step_count=0)

        def reset(self, seed: Any = None, episode_id: Any = None, **kwargs: Any) -> Any:
            self._state = State(episode_id=episode_id, step_count=0)
            return WaitObservation()

        def step(self, action: Any, timeout_s: Any = None, **kwargs: Any) -> Any:
            raise NotImplementedError("step_async serves every step")

        async def step_async(self, action: Any, timeout_s: Any = None, **kwargs: Any) -> Any:
            self._state.step_count += 1
            if action.wait_seconds > 0:
                await asyncio.sleep(action.wait_seconds)
                return WaitObservation(waited=action.wait_seconds)
            return WaitObservation(done=True, reward=1.0)

        @property
        def state(self) -> Any:
            return self._state

    app = create_fastapi_app(
        WaitEnvironment, WaitAction, WaitObservation, max_concurrent_envs=sessions
    )
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="error", backlog=8192)


@dataclass
class Tally:
    episodes: int = 0
    succeeded: int = 0
    requests: int = 0
    quick: list[float] = field(default_factory=list)  # reset and final step, seconds
    beyond_wait: list[float] = field(default_factory=list)  # waiting step minus its wait
    errors: dict[str, int] = field(default_factory=dict)

    def failed(self, why: str) -> None:
        self.errors[why] = self.errors.get(why, 0) + 1


def benchmax_steps(wait: float) -> tuple[dict[str, Any], dict[str, Any]]:
    call = {
        "id": "w",
        "type": "function",
        "function": {"name": "wait", "arguments": json.dumps({"seconds": wait})},
    }
    waiting = {"message": {"role": "assistant", "content": None, "tool_calls": [call]}}
    return waiting, {"message": {"role": "assistant", "content": "done"}}


def openenv_steps(wait: float) -> tuple[dict[str, Any], dict[str, Any]]:
    return {"wait_seconds": wait}, {"wait_seconds": 0.0}


async def episode(http: Any, url: str, kind: str, wait: float, tally: Tally) -> None:
    waiting, final = (benchmax_steps if kind == "benchmax" else openenv_steps)(wait)
    try:
        async with http.ws_connect(url, max_msg_size=0, timeout=60) as ws:
            for index, (kind_, data) in enumerate(
                (("reset", {}), ("step", waiting), ("step", final))
            ):
                started = time.perf_counter()
                await ws.send_str(json.dumps({"type": kind_, "data": data}))
                reply = json.loads((await ws.receive(timeout=120)).data)
                took = time.perf_counter() - started
                if reply.get("type") != "observation":
                    tally.failed(str(reply.get("data", {}).get("code", reply.get("type"))))
                    return
                tally.requests += 1
                if index == 1:
                    tally.beyond_wait.append(took - wait)
                else:
                    tally.quick.append(took)
            data = reply["data"]
            if data.get("done") and data.get("reward") == 1.0:
                tally.succeeded += 1
            else:
                tally.failed("not done")
            with contextlib.suppress(Exception):
                await ws.send_str(json.dumps({"type": "close"}))
    except Exception as error:  # a refused, dropped or timed-out connection
        tally.failed(type(error).__name__)
    finally:
        tally.episodes += 1


async def load(url: str, kind: str, sessions: int, duration: float, seed: int) -> Tally:
    import aiohttp

    tally = Tally()
    rng = random.Random(seed)
    stop = time.monotonic() + duration
    connector = aiohttp.TCPConnector(limit=0, force_close=True)
    async with aiohttp.ClientSession(connector=connector) as http:

        async def session(number: int) -> None:
            await asyncio.sleep(number * 2.0 / sessions)  # connect over the first 2 s
            while time.monotonic() < stop:
                await episode(http, url, kind, rng.uniform(*WAIT_RANGE), tally)

        await asyncio.gather(*(session(n) for n in range(sessions)))
    return tally


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mb(pid: int) -> float:
    match = re.search(r"VmHWM:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    return int(match.group(1)) / 1024 if match else float("nan")


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def server_process(kind: str, sessions: int, port: int, data: Path) -> Any:
    if kind == "benchmax":
        command = [
            sys.executable, "-m", "benchmax.cli", "serve", f"{__file__}:WaitEnv",
            "--protocol", "openenv", "--port", str(port), "--data", str(data),
            "--max-sessions", str(sessions + 64), "--session-timeout", "300",
        ]  # fmt: skip
    else:
        command = [sys.executable, __file__, "--openenv-server", str(port), str(sessions + 64)]
    log = LOGS / f"{kind}-{sessions}.log"  # a file: a full pipe would stall the server
    with log.open("wb") as sink:
        process = subprocess.Popen(command, cwd=ROOT, stdout=sink, stderr=sink)
    try:
        wait_until_listening(port, process, log)
        yield process
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_until_listening(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    import socket

    deadline = time.monotonic() + 600  # openenv-core imports gradio: slow on a busy machine
    while time.monotonic() < deadline:
        if process.poll() is not None:
            error = log.read_text(errors="replace")[-2000:]
            raise SystemExit(f"server exited with {process.returncode}: {error}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise SystemExit("server did not listen within 600 s")


def p99(values: list[float]) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def measure(kind: str, sessions: int, duration: float, data: Path) -> dict[str, Any]:
    port = free_port()
    with server_process(kind, sessions, port, data) as process:
        before = cpu_seconds(process.pid)
        started = time.perf_counter()
        tally = asyncio.run(load(f"ws://127.0.0.1:{port}/ws", kind, sessions, duration, 7))
        elapsed = time.perf_counter() - started
        cpu = cpu_seconds(process.pid) - before
        rss = peak_rss_mb(process.pid)
    log_lines = (LOGS / f"{kind}-{sessions}.log").read_text(errors="replace").splitlines()
    return {
        "server_log_lines": len(log_lines),
        "server_log_tail": log_lines[-3:],
        "server": kind,
        "sessions": sessions,
        "episodes": tally.episodes,
        "success": tally.succeeded / tally.episodes if tally.episodes else 0.0,
        "requests_per_s": tally.requests / elapsed,
        "p99_quick_ms": 1000 * p99(tally.quick),
        "p99_beyond_wait_ms": 1000 * p99(tally.beyond_wait),
        "server_cpu_s": cpu,
        "requests_per_cpu_s": tally.requests / cpu if cpu else float("nan"),
        "peak_rss_mb": rss,
        "errors": dict(tally.errors),
    }


def show(row: dict[str, Any]) -> None:
    print(
        f"{row['server']:>9} {row['sessions']:>6} sessions: success {100 * row['success']:.2f}% "
        f"of {row['episodes']} episodes, {row['requests_per_s']:.0f} requests/s, p99 "
        f"{row['p99_quick_ms']:.0f} ms (reset/final), {row['p99_beyond_wait_ms']:.0f} ms "
        f"beyond the wait, server CPU {row['server_cpu_s']:.1f} s = "
        f"{row['requests_per_cpu_s']:.0f} requests/CPU-s, peak RSS {row['peak_rss_mb']:.0f} MB"
        + (f", errors {row['errors']}" if row["errors"] else ""),
        flush=True,
    )
    if row["errors"] and row["server_log_tail"]:
        print(f"    server log ({row['server_log_lines']} lines) ends: {row['server_log_tail']}")


def raise_open_file_limit() -> int:
    """As many open files as allowed (root may raise the hard limit); the limit set."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    for wanted in (1 << 20, 1 << 18, 1 << 16, hard):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, wanted))
            return wanted
        except (ValueError, OSError):
            continue
    return soft


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--openenv-server":
        openenv_server(int(sys.argv[2]), int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=2048)
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--skip-openenv", action="store_true")
    parser.add_argument("--skip-largest", action="store_true")
    args = parser.parse_args()
    hard = raise_open_file_limit()
    LOGS.mkdir(exist_ok=True)
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    print(f"cores: {os.cpu_count()}, open-file limit: {hard}", flush=True)
    with tempfile.TemporaryDirectory() as data:
        rows = [measure("benchmax", args.sessions, args.duration, Path(data))]
        show(rows[0])
        if not args.skip_openenv:
            rows.append(measure("openenv", args.sessions, args.duration, Path(data)))
            show(rows[1])
            ratio = rows[0]["requests_per_cpu_s"] / rows[1]["requests_per_cpu_s"]
            print(f"benchmax / openenv-core requests per server CPU-second: {ratio:.2f}x")
        if args.skip_largest:
            return
        largest = args.sessions if rows[0]["success"] == 1.0 else None
        count = args.sessions
        for _ in range(4):
            count = count * 3 // 2
            if count + 256 > hard:
                print(f"stop: {count} sessions would pass the open-file limit ({hard})")
                break
            row = measure("benchmax", count, args.duration, Path(data))
            show(row)
            if row["success"] < 1.0:
                break
            largest = count
        print(f"largest session count at 100% success: {largest}")


if __name__ == "__main__":
    main()
