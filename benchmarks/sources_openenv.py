"""OpenEnvEnv's cost over OpenEnv's own protocol, and what importing openenv-core costs.

    uv run python benchmarks/sources_openenv.py [--episodes 64] [--group 4]

Serves the guess-the-number example (``examples/openenv_guess``, openenv-core's
``create_app``) on 127.0.0.1 from a thread, then plays the same episodes two ways: bare
``websockets`` reset/step loops (what any OpenEnv client must do) and ``OpenEnvEnv``
under ``run_environment`` with an in-process mock model that always guesses 10 (4 steps
per episode). Also times ``import openenv.core`` and ``import websockets`` in fresh
interpreters. Prints one line per figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import uvicorn

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from examples.openenv_guess.environment import (  # noqa: E402
    MAX_GUESSES,
    GuessAction,
    GuessEnvironment,
    GuessObservation,
)
from openenv.core.env_server.http_server import create_app  # noqa: E402

from benchmax.auth import StaticBearerAuth  # noqa: E402
from benchmax.runner import RunConfig, run_environment  # noqa: E402
from benchmax.sources.openenv import OpenEnvEnv  # noqa: E402
from benchmax.testing import MockModelServer  # noqa: E402


def serve() -> tuple[str, uvicorn.Server, threading.Thread]:
    app = create_app(GuessEnvironment, GuessAction, GuessObservation, max_concurrent_envs=1024)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="critical"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    return f"http://127.0.0.1:{sock.getsockname()[1]}", server, thread


async def bare(url: str, episodes: int, concurrency: int) -> float:
    from websockets.asyncio.client import connect

    gate = asyncio.Semaphore(concurrency)

    async def episode(seed: int) -> None:
        async with gate, connect(url.replace("http", "ws") + "/ws", proxy=None) as ws:
            await ws.send(json.dumps({"type": "reset", "data": {"seed": seed}}))
            await ws.recv()
            for _ in range(MAX_GUESSES):
                await ws.send(json.dumps({"type": "step", "data": {"message": "10"}}))
                if json.loads(await ws.recv())["data"]["done"]:
                    break
            await ws.send(json.dumps({"type": "close"}))
            await ws.wait_closed()

    started = time.perf_counter()
    await asyncio.gather(*(episode(seed) for seed in range(episodes)))
    return time.perf_counter() - started


async def under_benchmax(url: str, episodes: int, group: int, concurrency: int) -> float:
    env = OpenEnvEnv(url, episodes=episodes // group, max_turns=MAX_GUESSES)
    async with MockModelServer(lambda body, request: "10") as mock:
        config = RunConfig(
            model="m",
            base_url=mock.base_url,
            model_auth=StaticBearerAuth("mock-key-0123"),
            split="train",
            group_size=group,
            output=None,
            max_concurrent_groups=max(1, concurrency // group),
            judge_check=False,
        )
        started = time.perf_counter()
        await run_environment(env, config)
        return time.perf_counter() - started


def import_seconds(module: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", f"import {module}"], check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--group", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    url, server, thread = serve()
    try:
        seconds = asyncio.run(bare(url, args.episodes, args.concurrency))
        print(f"bare websockets: {args.episodes / seconds:.1f} episodes/s")
        seconds = asyncio.run(under_benchmax(url, args.episodes, args.group, args.concurrency))
        print(f"OpenEnvEnv + run_environment: {args.episodes / seconds:.1f} episodes/s")
    finally:
        server.should_exit = True
        thread.join(timeout=30)
    print(f"import openenv.core: {import_seconds('openenv.core'):.1f} s")
    print(f"import websockets.asyncio.client: {import_seconds('websockets.asyncio.client'):.1f} s")


if __name__ == "__main__":
    main()
