"""Capacity, idle timeouts and vanished clients: no session, task or tool process leaks."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest
from openenv.core.generic_client import GenericEnvClient
from tests.serving.conftest import QUICKSTART, served

from benchmax.envs import BaseEnv, Dataset, Example
from benchmax.serving import RunningServer, ServeOptions, serving
from benchmax.testing import MockModelServer

BOUND = 60.0  # seconds: generous, only ever reached when something is wrong


async def eventually(condition: Callable[[], bool], what: str) -> None:
    async with asyncio.timeout(BOUND):
        while not condition():
            await asyncio.sleep(0.02)
    assert condition(), what


def serve_tasks() -> list[asyncio.Task[Any]]:
    return [
        t
        for t in asyncio.all_tasks()
        if t.get_name().startswith("benchmax-serve-") and not t.get_name().endswith("reaper")
    ]


class ProcessEnv(BaseEnv):
    """Every rollout starts a tool process (killed when the rollout ends) and offers a
    ``wait`` tool that blocks until the test lets it go."""

    reward_keys = ("ok",)
    max_turns = 3
    started: list[asyncio.subprocess.Process]
    release: asyncio.Event

    def __init__(self) -> None:
        super().__init__()
        self.started = []
        self.release = asyncio.Event()
        self.waiting = asyncio.Event()

    async def create_dataset(self, split: Any, base_dir: Path, *, max_examples: int | None = None):
        payload = {"prompt_messages": [{"role": "user", "content": "go"}]}
        return Dataset([Example(id="only", payload=payload)])

    async def list_tools(self) -> list[Any]:
        parameters = {"type": "object", "properties": {}}
        return [{"type": "function", "function": {"name": "wait", "parameters": parameters}}]

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        self.waiting.set()
        await self.release.wait()
        return "released"

    @contextlib.asynccontextmanager
    async def rollout_context(self, rollout_id: str, example: Any) -> AsyncIterator[None]:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", "import time; time.sleep(600)"
        )
        self.started.append(process)
        try:
            yield
        finally:
            process.kill()
            await process.wait()

    async def compute_reward(self, rollout: Any) -> dict[str, float]:
        return {"ok": 1.0}


@contextlib.asynccontextmanager
async def process_server(**options: Any) -> AsyncIterator[tuple[ProcessEnv, RunningServer]]:
    env = ProcessEnv()
    async with serving(env, ServeOptions(port=0, **options)) as server:
        yield env, server


def alive(process: asyncio.subprocess.Process) -> bool:
    if process.returncode is not None:
        return False
    try:
        os.kill(process.pid, 0)
    except ProcessLookupError:
        return False
    return True


WAIT_CALL = {
    "message": {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "w1", "type": "function", "function": {"name": "wait", "arguments": "{}"}}
        ],
    }
}


async def test_capacity_reached_past_max_sessions_then_a_slot_frees() -> None:
    async with process_server(max_sessions=2) as (_env, server):
        first = GenericEnvClient(base_url=server.base_url)
        second = GenericEnvClient(base_url=server.base_url)
        await first.reset()
        await second.reset()
        third = GenericEnvClient(base_url=server.base_url)
        with pytest.raises(RuntimeError, match="CAPACITY_REACHED"):
            await third.reset()
        await third.close()
        async with aiohttp.ClientSession() as http:
            async with http.ws_connect(server.base_url + "/ws") as ws:
                error = await ws.receive_json(timeout=BOUND)
        assert error["type"] == "error" and error["data"]["code"] == "CAPACITY_REACHED"
        assert error["data"]["max_sessions"] == 2
        async with httpx.AsyncClient() as client:
            refused = await client.post(server.base_url + "/reset", json={})
        assert refused.status_code == 503 and "capacity" in refused.json()["detail"]
        await first.close()
        await eventually(lambda: server.sessions.active == 1, "the closed client's slot frees")
        fourth = GenericEnvClient(base_url=server.base_url)
        result = await fourth.reset()
        assert result.done is False
        await fourth.close()
        await second.close()
        await eventually(lambda: server.sessions.active == 0, "every slot frees")


async def test_an_idle_session_times_out_and_is_cleaned_up() -> None:
    async with process_server(session_timeout=0.3) as (env, server):
        async with httpx.AsyncClient() as client:
            reset = (await client.post(server.base_url + "/reset", json={})).json()
            episode_id = reset["observation"]["episode_id"]
            await eventually(lambda: server.sessions.active == 0, "the idle HTTP episode is reaped")
            step = await client.post(
                server.base_url + "/step", json={"action": WAIT_CALL, "episode_id": episode_id}
            )
        assert step.status_code == 404 and "no live episode" in step.json()["detail"]
        ws_client = GenericEnvClient(base_url=server.base_url)
        await ws_client.reset()
        await eventually(lambda: server.sessions.active == 0, "the idle WebSocket is reaped")
        with pytest.raises(Exception):  # noqa: B017 - the server closed the connection
            await ws_client.step(WAIT_CALL)
        await ws_client.close()
        await eventually(lambda: not any(alive(p) for p in env.started), "tool processes end")
        await eventually(lambda: not serve_tasks(), "no rollout task is left")


async def test_a_busy_step_is_not_idle() -> None:
    """A step whose tool outlasts the timeout is not reaped while it runs."""
    async with process_server(session_timeout=0.2) as (env, server):
        async with GenericEnvClient(base_url=server.base_url, message_timeout_s=BOUND) as client:
            await client.reset()
            stepping = asyncio.create_task(client.step(WAIT_CALL))
            await env.waiting.wait()
            await asyncio.sleep(0.8)  # several timeouts pass while the tool runs
            assert server.sessions.active == 1
            env.release.set()
            result = await stepping
        assert result.observation["messages"][0]["content"] == "released"


@pytest.mark.parametrize("when", ["after_reset", "mid_step"])
async def test_a_vanished_websocket_client_leaks_nothing(when: str) -> None:
    async with process_server(session_timeout=None) as (env, server):
        async with aiohttp.ClientSession() as http:
            ws = await http.ws_connect(server.base_url + "/ws")
            await ws.send_json({"type": "reset", "data": {}})
            reply = await ws.receive_json(timeout=BOUND)
            assert reply["type"] == "observation"
            assert len(env.started) == 1 and alive(env.started[0])
            if when == "mid_step":
                await ws.send_json({"type": "step", "data": WAIT_CALL})
                await env.waiting.wait()
            # vanish: drop the TCP connection without a close frame
            transport = ws._response.connection.transport  # type: ignore[union-attr]
            transport.abort()
        await eventually(lambda: server.sessions.active == 0, "the session is freed")
        await eventually(lambda: not alive(env.started[0]), "the tool process ends")
        await eventually(lambda: not serve_tasks(), "no rollout task is left")


async def test_a_vanished_http_client_mid_step_leaks_nothing() -> None:
    async with process_server(session_timeout=None) as (env, server):
        async with httpx.AsyncClient(timeout=BOUND) as client:
            reset = (await client.post(server.base_url + "/reset", json={})).json()
            episode_id = reset["observation"]["episode_id"]
            step = asyncio.create_task(
                client.post(
                    server.base_url + "/step", json={"action": WAIT_CALL, "episode_id": episode_id}
                )
            )
            await env.waiting.wait()
            step.cancel()  # the client gives up: its connection closes
            await asyncio.gather(step, return_exceptions=True)
        await eventually(lambda: server.sessions.active == 0, "the session is freed")
        await eventually(lambda: not alive(env.started[0]), "the tool process ends")
        await eventually(lambda: not serve_tasks(), "no rollout task is left")


async def test_quickstart_sessions_close_at_shutdown() -> None:
    async with MockModelServer(QUICKSTART.policy(), record=False) as mock:
        async with served(QUICKSTART, mock) as server:
            clients = [GenericEnvClient(base_url=server.base_url) for _ in range(3)]
            for client in clients:
                await client.reset()
            assert server.sessions.active == 3
        assert not serve_tasks()
        for client in clients:
            await client.close()


@pytest.mark.parametrize(
    "action",
    [WAIT_CALL, {"type": "call_tool", "tool_name": "wait", "arguments": {}}],
    ids=["message", "call_tool"],
)
async def test_a_step_past_its_timeout_is_504_and_closes_the_episode(
    action: dict[str, Any],
) -> None:
    """The tool never returns: ``timeout_s`` ends the step, the episode and its process."""
    async with process_server(session_timeout=None) as (env, server):
        async with httpx.AsyncClient(timeout=BOUND) as client:
            reset = (await client.post(server.base_url + "/reset", json={})).json()
            episode_id = reset["observation"]["episode_id"]
            body = {"action": action, "episode_id": episode_id, "timeout_s": 0.2}
            step = await client.post(server.base_url + "/step", json=body)
            assert step.status_code == 504
            assert "longer than timeout_s=0.2; the episode was closed" in step.json()["detail"]
            await eventually(lambda: not alive(env.started[0]), "the tool process ends")
            again = await client.post(
                server.base_url + "/step", json={"action": WAIT_CALL, "episode_id": episode_id}
            )
        assert again.status_code == 404 and "no live episode" in again.json()["detail"]
