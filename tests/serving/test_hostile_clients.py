"""``benchmax serve`` under hostile or careless clients: secrets masked in everything sent,
bounded WebSocket reads and writes, slow HTTP requests dropped, one HTTP step at a time with
idempotent retries, abandoned episode ids, openenv-core's MCPToolClient, huge rewards."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import httpx
import pytest
from openenv.core.mcp_client import MCPToolClient
from tests.serving.conftest import CALCULATOR, served

from benchmax.auth import StaticBearerAuth
from benchmax.envs import BaseEnv, Dataset, Example
from benchmax.serving import RunningServer, ServeOptions, serving
from benchmax.testing import MockModelServer

BOUND = 60.0  # seconds: generous, only ever reached when something is wrong
SECRET = "sk-judge-0123456789abcdef"
HERE = Path(__file__).resolve().parent


async def eventually(condition: Callable[[], bool], what: str) -> None:
    async with asyncio.timeout(BOUND):
        while not condition():
            await asyncio.sleep(0.02)
    assert condition(), what


class GateEnv(BaseEnv):
    """Tools: ``wait`` (blocks until ``release`` is set), ``big`` (``size`` bytes of
    text), ``peek`` (echoes the judge's key); the reward hook fails quoting the key, as a
    judge answering 401 with the request's headers does."""

    reward_keys = ("ok",)
    max_turns = 1000

    def __init__(self, *, fail_reward: bool = False) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.waiting = asyncio.Event()
        self.tool_runs = 0
        self.fail_reward = fail_reward

    async def create_dataset(self, split: Any, base_dir: Path, *, max_examples: int | None = None):
        payload = {"prompt_messages": [{"role": "user", "content": "go"}]}
        return Dataset([Example(id="only", payload=payload)])

    async def list_tools(self) -> list[Any]:
        size = {"type": "object", "properties": {"size": {"type": "integer"}}}
        empty = {"type": "object", "properties": {}}
        return [
            {"type": "function", "function": {"name": "wait", "parameters": empty}},
            {"type": "function", "function": {"name": "big", "parameters": size}},
            {"type": "function", "function": {"name": "peek", "parameters": empty}},
        ]

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        self.tool_runs += 1
        if tool_name == "big":
            return "x" * int(tool_args.get("size", 1_000_000))
        if tool_name == "peek":
            return f"the judge key is {SECRET}"
        self.waiting.set()
        await self.release.wait()
        return "released"

    async def compute_reward(self, rollout: Any) -> dict[str, float]:
        if self.fail_reward:
            raise RuntimeError(f"judge answered 401 for Authorization: Bearer {SECRET}")
        return {"ok": 1.0}


@contextlib.asynccontextmanager
async def gate_server(env: GateEnv, **options: Any) -> AsyncIterator[RunningServer]:
    providers = {"judge": StaticBearerAuth(SECRET)}
    settings = {"port": 0, "auth_providers": providers, **options}
    async with serving(env, ServeOptions(**settings)) as server:
        yield server


def call(name: str, **arguments: Any) -> dict[str, Any]:
    tool_call = {
        "id": f"c-{name}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    return {"message": {"role": "assistant", "content": None, "tool_calls": [tool_call]}}


FINAL = {"message": {"role": "assistant", "content": "done"}}


# --- a raw WebSocket client: it writes frames, and reads only when told ---------------


class RawWebSocket:
    """A WebSocket client on a bare socket (RFC 6455 by hand): frames are written with
    a zero mask and nothing is read unless ``read_message`` or ``wait_closed`` asks."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def connect(cls, base_url: str, path: str = "/ws") -> RawWebSocket:
        url = urlsplit(base_url)
        host, port = url.hostname or "127.0.0.1", url.port or 80
        reader, writer = await asyncio.open_connection(host, port)
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write(
            (
                f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                "Sec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), BOUND)
        assert b" 101 " in head.split(b"\r\n", 1)[0], head
        return cls(reader, writer)

    @staticmethod
    def frame(payload: bytes) -> bytes:
        size = len(payload)
        if size < 126:
            head = bytes([0x81, 0x80 | size])
        elif size < 65536:
            head = bytes([0x81, 0x80 | 126]) + size.to_bytes(2, "big")
        else:
            head = bytes([0x81, 0x80 | 127]) + size.to_bytes(8, "big")
        return head + b"\x00\x00\x00\x00" + payload  # a zero mask leaves the payload as is

    async def send_json(self, data: object) -> None:
        self.writer.write(self.frame(json.dumps(data).encode()))
        await asyncio.wait_for(self.writer.drain(), BOUND)

    async def read_message(self) -> str:
        async with asyncio.timeout(BOUND):
            head = await self.reader.readexactly(2)
            size = head[1] & 0x7F
            if size == 126:
                size = int.from_bytes(await self.reader.readexactly(2), "big")
            elif size == 127:
                size = int.from_bytes(await self.reader.readexactly(8), "big")
            return (await self.reader.readexactly(size)).decode()

    async def wait_closed(self) -> None:
        """Read (and drop) everything until the server ends the connection."""
        async with asyncio.timeout(BOUND):
            with contextlib.suppress(ConnectionError):
                while await self.reader.read(1 << 20):
                    pass

    def abort(self) -> None:
        self.writer.transport.abort()


# --- 4: secrets masked in everything sent ----------------------------------------------


async def test_the_auth_key_never_leaves_the_server_over_websocket_or_http() -> None:
    env = GateEnv(fail_reward=True)
    async with gate_server(env) as server:
        async with aiohttp.ClientSession() as http:
            async with http.ws_connect(server.base_url + "/ws") as ws:
                await ws.send_json({"type": "reset", "data": {}})
                texts = [(await ws.receive(timeout=BOUND)).data]
                await ws.send_json({"type": "step", "data": call("peek")})
                texts.append((await ws.receive(timeout=BOUND)).data)
                await ws.send_json({"type": "step", "data": FINAL})
                texts.append((await ws.receive(timeout=BOUND)).data)
        async with httpx.AsyncClient(timeout=BOUND) as client:
            reset = await client.post(server.base_url + "/reset", json={})
            episode_id = reset.json()["observation"]["episode_id"]
            bodies = [reset.text]
            for action in (call("peek"), FINAL):
                step = await client.post(
                    server.base_url + "/step", json={"action": action, "episode_id": episode_id}
                )
                bodies.append(step.text)
    for sent in (texts, bodies):
        assert not any(SECRET in text for text in sent)
        peeked = json.loads(sent[1])
        peeked = peeked.get("data", peeked)
        assert peeked["observation"]["messages"][0]["content"] == "the judge key is ***"
        final = json.loads(sent[2])
        final = final.get("data", final)
        assert final["observation"]["termination_reason"] == "reward_error"
        logs = json.dumps(final["observation"]["trajectory"])
        assert "Bearer ***" in logs


async def test_the_auth_key_never_leaves_a_nemo_gym_server() -> None:
    async with (
        gate_server(GateEnv(fail_reward=True), protocol="nemo-gym") as server,
        httpx.AsyncClient(timeout=BOUND) as client,
    ):
        seeded = await client.post(server.base_url + "/seed_session", json={})
        cookie = {"Cookie": f"benchmax_session={seeded.cookies['benchmax_session']}"}
        peeked = await client.post(server.base_url + "/peek", json={}, headers=cookie)
        assert peeked.text == "the judge key is ***"
        final = {"type": "message", "role": "assistant", "content": "done"}
        verify = {"responses_create_params": {"input": []}, "response": {"output": [final]}}
        verdict = await client.post(server.base_url + "/verify", json=verify, headers=cookie)
    assert verdict.status_code == 200 and SECRET not in verdict.text
    assert verdict.json()["termination_reason"] == "reward_error"


async def test_a_local_run_masks_the_key_as_serve_does(tmp_path: Path) -> None:
    """The results file of a local run hides the key as the served trajectory does
    (`Bearer ***`): both are encoded by MaskedRecords."""
    from benchmax.results import read_results
    from benchmax.runner import RunConfig, run_environment

    env = GateEnv(fail_reward=True)
    async with MockModelServer(lambda body, request: "done", record=False) as mock:
        output = tmp_path / "run.jsonl"
        await run_environment(
            env,
            RunConfig(
                model="m",
                base_url=mock.base_url,
                auth_providers={"judge": StaticBearerAuth(SECRET)},
                group_size=1,
                output=output,
                judge_check=False,
            ),
        )
    assert SECRET not in output.read_text()
    recorded = read_results(output).rollouts[0]
    assert recorded.termination_reason == "reward_error"
    assert "Bearer ***" in json.dumps(recorded.to_json())


# --- 5: bounded WebSocket reads and writes ----------------------------------------------


@pytest.mark.parametrize(
    "bound",
    [
        pytest.param({"write_timeout": 0.5, "session_timeout": None}, id="write_timeout"),
        pytest.param({"write_timeout": 600.0, "session_timeout": 0.5}, id="session_timeout"),
    ],
)
async def test_a_client_that_never_reads_loses_its_connection(bound: dict[str, Any]) -> None:
    env = GateEnv()
    async with gate_server(env, **bound) as server:
        client = await RawWebSocket.connect(server.base_url)
        await client.send_json({"type": "reset", "data": {}})
        assert json.loads(await client.read_message())["type"] == "observation"
        for _ in range(24):  # 24 replies of 2 MB each, never read
            await client.send_json({"type": "step", "data": call("big", size=2_000_000)})
        await eventually(lambda: server.sessions.active == 0, "the session is freed")
        await client.wait_closed()  # the server cut the connection
        assert server.sessions.active == 0


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


RSS_GROWTH_BOUND = 64 * 1024 * 1024
"""docs/serving.md: 400 x 1 MB messages sent during one step grow the server by less."""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc")
async def test_messages_sent_during_a_step_are_bounded_in_memory() -> None:
    """The server runs in its own process; a raw client starts a step that never ends,
    then sends 400 messages of 1 MB: the server stops reading once its inbox is full
    (TCP holds the client back) and grows by less than ``RSS_GROWTH_BOUND``."""
    process = subprocess.Popen(
        [sys.executable, str(HERE / "hostile_server.py"), json.dumps({"session_timeout": 600})],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(process.stdout.readline), BOUND)
        base_url = line.strip()
        client = await RawWebSocket.connect(base_url)
        await client.send_json({"type": "reset", "data": {}})
        await client.read_message()
        await client.send_json({"type": "step", "data": call("wait")})
        await asyncio.sleep(0.5)
        before = _rss_bytes(process.pid)
        message = RawWebSocket.frame(b"x" * 1_000_000)
        sent = 0
        for _ in range(400):
            client.writer.write(message)
            try:
                await asyncio.wait_for(client.writer.drain(), 5.0)
            except TimeoutError:
                break  # the server stopped reading: flow control holds us back
            sent += 1
        await asyncio.sleep(1.0)
        growth = _rss_bytes(process.pid) - before
        print(f"sent {sent} MB during the step; server RSS grew {growth / 2**20:.1f} MiB")
        assert growth < RSS_GROWTH_BOUND, growth
        client.abort()
    finally:
        process.kill()
        process.wait()


# --- 6: slow HTTP requests dropped ------------------------------------------------------


async def _dropped(base_url: str, data: bytes) -> bytes:
    """What the server answers a connection that sends ``data`` and then nothing,
    once it closes it (raises TimeoutError when it never does)."""
    url = urlsplit(base_url)
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    writer.write(data)
    await writer.drain()
    answered = b""
    async with asyncio.timeout(BOUND):
        with contextlib.suppress(ConnectionError):
            while chunk := await reader.read(65536):
                answered += chunk
    writer.close()
    return answered


async def test_slow_headers_and_half_sent_bodies_are_dropped() -> None:
    env = GateEnv()
    async with gate_server(env, header_timeout=1.0, body_timeout=1.0) as server:
        loris = [
            _dropped(server.base_url, b"POST /reset HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            for _ in range(60)
        ]
        silent = _dropped(server.base_url, b"")
        half_body = _dropped(
            server.base_url,
            b"POST /reset HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b'Content-Length: 1000\r\n\r\n{"seed": ',
        )
        answers = await asyncio.gather(*loris, silent, half_body)
        assert all(answer == b"" for answer in answers[:61])  # closed without a reply
        head, _, body = answers[61].partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408")
        assert b"--body-timeout" in body
        assert server.sessions.active == 0
        async with httpx.AsyncClient(timeout=BOUND) as client:  # normal clients still served
            assert (await client.get(server.base_url + "/health")).status_code == 200
    defaults = ServeOptions()
    assert (defaults.header_timeout, defaults.body_timeout) == (60.0, 60.0)
    with pytest.raises(ValueError, match="body_timeout must be a positive number"):
        ServeOptions(body_timeout=0)


# --- 7: one step at a time, idempotent retries ------------------------------------------


async def test_one_http_step_at_a_time_and_a_retried_request_id_answers_the_first() -> None:
    env = GateEnv()
    async with (
        gate_server(env, session_timeout=None) as server,
        httpx.AsyncClient(timeout=BOUND) as client,
    ):
        reset = (await client.post(server.base_url + "/reset", json={})).json()
        episode_id = reset["observation"]["episode_id"]

        def step(action: dict[str, Any], request_id: str | None = None) -> Any:
            body: dict[str, Any] = {"action": action, "episode_id": episode_id}
            if request_id is not None:
                body["request_id"] = request_id
            return client.post(server.base_url + "/step", json=body)

        first = asyncio.create_task(step(call("wait"), "r1"))
        await env.waiting.wait()
        second = await step(call("big", size=10))
        assert second.status_code == 409 and "one step at a time" in second.json()["detail"]
        repeat = asyncio.create_task(step(call("wait"), "r1"))  # a retry while it runs
        await asyncio.sleep(0.2)
        assert not repeat.done()
        env.release.set()
        answered, repeated = await first, await repeat
        assert answered.status_code == repeated.status_code == 200
        assert answered.content == repeated.content
        assert answered.json()["observation"]["messages"][0]["content"] == "released"
        again = await step(call("wait"), "r1")  # a retry after it answered
        assert again.content == answered.content
        assert env.tool_runs == 1  # the step was applied once
        state = await client.get(server.base_url + "/state", params={"episode_id": episode_id})
        assert state.json()["step_count"] == 1
        done = await step(FINAL, "r2")
        assert done.json()["done"] is True
        assert (await step(FINAL, "r2")).content == done.content  # the episode is gone
        bad = await step(FINAL, "")
        assert bad.status_code == 422
        named = await client.post(server.base_url + "/reset", json={"episode_id": "mine"})
        episode_id = named.json()["observation"]["episode_id"]
        env.release.clear()
        env.release.set()
        first_run = await step(call("wait"), "same")
        assert first_run.status_code == 200 and env.tool_runs == 2
        await client.post(server.base_url + "/reset", json={"episode_id": "mine"})
        after_reset = await step(call("wait"), "same")  # a new episode: ids start over
        assert after_reset.status_code == 200 and env.tool_runs == 3


async def test_remembered_replies_are_bounded() -> None:
    from benchmax.serving._step_replies import StepReplies

    replies = StepReplies(max_entries=3, max_bytes=100)
    runs = 0

    async def reply(size: int) -> tuple[tuple[int, bytes], bool]:
        nonlocal runs
        runs += 1
        return (200, b"x" * size), True

    for index in range(5):
        await replies.answer(("e", str(index)), lambda: reply(10))
    assert len(replies) == 3 and not replies.known(("e", "0")) and replies.known(("e", "4"))
    await replies.answer(("e", "big"), lambda: reply(90))
    assert replies.remembered_bytes <= 100 and replies.known(("e", "big"))
    await replies.answer(("e", "huge"), lambda: reply(101))  # larger than all: not kept
    assert not replies.known(("e", "huge"))
    runs = 0
    await replies.answer(("e", "big"), lambda: reply(90))
    assert runs == 0


# --- 8: abandoned episode ids, MCPToolClient, huge rewards ------------------------------


async def test_resetting_an_abandoned_http_episode_id_reuses_it() -> None:
    env = GateEnv()
    async with (
        gate_server(env, max_sessions=1, session_timeout=600) as server,
        httpx.AsyncClient(timeout=BOUND) as client,
    ):
        first = await client.post(server.base_url + "/reset", json={"episode_id": "e1"})
        assert first.status_code == 200
        again = await client.post(server.base_url + "/reset", json={"episode_id": "e1"})
        assert again.status_code == 200, again.text
        assert again.json()["observation"]["episode_id"] == "e1"
        assert server.sessions.active == 1
        other = await client.post(server.base_url + "/reset", json={"episode_id": "e2"})
        assert other.status_code == 503  # the one slot is e1's, still live
    async with (
        gate_server(GateEnv(), session_timeout=600) as server,
        aiohttp.ClientSession() as http,
        http.ws_connect(server.base_url + "/ws") as ws,
    ):
        await ws.send_json({"type": "reset", "data": {"episode_id": "held"}})
        await ws.receive_json(timeout=BOUND)
        async with httpx.AsyncClient(timeout=BOUND) as client:
            taken = await client.post(server.base_url + "/reset", json={"episode_id": "held"})
        assert taken.status_code == 409 and "websocket session" in taken.json()["detail"]


async def test_openenv_core_mcp_tool_client_in_its_default_mode() -> None:
    async with MockModelServer(CALCULATOR.policy(), record=False) as mock:
        async with served(CALCULATOR, mock) as server:
            async with MCPToolClient(base_url=server.base_url) as client:
                tools = await client.list_tools()
                assert sorted(tool.name for tool in tools) == ["add", "multiply"]
                assert tools[0].input_schema["required"] == ["a", "b"]
                assert await client.call_tool("add", a=20, b=22) == '{"result":42}'
                with pytest.raises(RuntimeError, match="tool_not_found"):
                    await client.call_tool("divide", a=1, b=2)
                assert await client.call_tool("multiply", a=6, b=7) == '{"result":42}'
            async with httpx.AsyncClient(timeout=BOUND) as http:
                rpc = server.base_url + "/mcp"
                created = await http.post(
                    rpc, json={"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create"}
                )
                session_id = created.json()["result"]["session_id"]
                params = {"name": "divide", "arguments": {}, "session_id": session_id}
                unknown = await http.post(
                    rpc, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}
                )
        error = unknown.json()["error"]
        assert error["code"] == -32602 and "Unknown tool: divide" in error["message"]


async def test_aggregate_metrics_of_huge_rewards() -> None:
    env = GateEnv()
    async with (
        gate_server(env, protocol="nemo-gym") as server,
        httpx.AsyncClient(timeout=BOUND) as client,
    ):
        huge = {"reward": 1.7e308, "reward_components": {"ok": -1.7e308}}
        body = {"verify_responses": [huge, huge, huge, {"reward": 10**400}]}
        answer = await client.post(server.base_url + "/aggregate_metrics", json=body)
        assert answer.status_code == 200, answer.text
        metrics = answer.json()["agent_metrics"]
        assert metrics["mean/reward"] == 1.7e308 and metrics["mean/ok"] == -1.7e308
        assert metrics["num_rollouts"] == 4
        python_json = (
            b'{"verify_responses": [{"reward": Infinity}, {"reward": NaN}, {"reward": 1e999}]}'
        )
        written = await client.post(server.base_url + "/aggregate_metrics", content=python_json)
        assert written.status_code == 200, written.text
        assert written.json()["agent_metrics"]["num_rollouts"] == 3
        assert "mean/reward" not in written.json()["agent_metrics"]  # no finite reward
        garbage = await client.post(server.base_url + "/aggregate_metrics", content=b"{nope")
        assert garbage.status_code == 400
