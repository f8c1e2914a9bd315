"""Helpers for BaseEnv tests: a tiny env family, request builders, socket counting."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from benchmax.auth import ModelAuth, ModelRequestContext, StaticBearerAuth
from benchmax.envs.base.env import BaseEnv, BaseRollout
from benchmax.envs.dataset import Dataset
from benchmax.envs.shared_types import Example, RewardMap, RolloutRequest
from benchmax.testing import MockModelServer

PROMPT = [{"role": "user", "content": "What is 6 times 7?"}]
PAYLOAD = {"prompt_messages": PROMPT, "answer": "42"}

MULTIPLY_TOOL = {
    "type": "function",
    "function": {
        "name": "multiply",
        "parameters": {
            "type": "object",
            "properties": {"left": {"type": "integer"}, "right": {"type": "integer"}},
            "required": ["left", "right"],
        },
    },
}


class AnswerEnv(BaseEnv):
    """Single key ``correct``: 1.0 when the last assistant text contains the answer."""

    reward_keys = ("correct",)
    max_turns = 1

    def __init__(self, **limits: Any) -> None:
        super().__init__(**limits)
        self.reward_calls: list[BaseRollout] = []

    async def create_dataset(
        self, split: Any, base_dir: Path, *, max_examples: int | None = None
    ) -> Dataset[dict[str, Any]]:
        return Dataset([Example(id="e", payload=PAYLOAD)])

    async def compute_reward(self, rollout: BaseRollout) -> RewardMap | None:
        self.reward_calls.append(rollout)
        content = rollout.messages[-1].get("content") or ""
        return {"correct": 1.0 if rollout.example_args.get("answer") in content else 0.0}


class ToolEnv(AnswerEnv):
    """``AnswerEnv`` with a ``multiply`` tool whose calls are recorded."""

    max_turns = 3
    tools: Sequence[Any] = (MULTIPLY_TOOL,)

    def __init__(self, **limits: Any) -> None:
        super().__init__(**limits)
        self.tool_calls: list[tuple[str, str, dict[str, Any]]] = []

    async def list_tools(self) -> list[Any]:
        return list(self.tools)

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        self.tool_calls.append((rollout_id, tool_name, tool_args))
        return {"value": tool_args["left"] * tool_args["right"]}


def make_request(
    server: MockModelServer,
    rollout_id: str = "rollout-0",
    *,
    payload: Mapping[str, Any] | None = None,
    auth: ModelAuth | None = None,
    split: str = "train",
    example_id: str = "e",
) -> RolloutRequest[dict[str, Any]]:
    """A request whose base URL is its own session on ``server``."""
    return RolloutRequest(
        rollout_id=rollout_id,
        example=Example(id=example_id, payload=dict(PAYLOAD if payload is None else payload)),
        model="test-model",
        base_url=server.session_url(rollout_id),
        model_auth=StaticBearerAuth(f"key-{rollout_id}") if auth is None else auth,
        split=split,  # type: ignore[arg-type]
    )


def make_request_for_url(base_url: str) -> RolloutRequest[dict[str, Any]]:
    """A request to any OpenAI-compatible ``base_url`` (e.g. a fixed_response_server)."""
    return RolloutRequest(
        rollout_id="rollout-0",
        example=Example(id="e", payload=dict(PAYLOAD)),
        model="test-model",
        base_url=base_url,
        model_auth=StaticBearerAuth("k"),
    )


def tool_reply(*calls: tuple[str, Any], content: Any = None) -> dict[str, Any]:
    """A scripted assistant reply calling ``(name, arguments)`` tools."""
    return {
        "content": content,
        "tool_calls": [{"name": name, "arguments": arguments} for name, arguments in calls],
    }


class CountingAuth:
    """Auth recording every context it is asked about; the n-th call's header is
    ``Authorization: Bearer attempt-n``."""

    def __init__(self) -> None:
        self.contexts: list[ModelRequestContext] = []

    async def headers_for_request(self, context: ModelRequestContext) -> dict[str, str]:
        self.contexts.append(context)
        return {"Authorization": f"Bearer attempt-{len(self.contexts)}"}


class HoldUntilAll:
    """A mock policy holding every request until ``count`` have arrived; then it
    answers ``"ok"`` if ``release``, else keeps holding (until cancelled)."""

    def __init__(self, count: int, *, release: bool) -> None:
        self.count = count
        self.release = release
        self.arrived = 0
        self.all_arrived = asyncio.Event()

    async def __call__(self, body: dict[str, Any]) -> str:
        self.arrived += 1
        if self.arrived == self.count:
            self.all_arrived.set()
        await self.all_arrived.wait()
        if not self.release:
            await asyncio.sleep(60)
        return "ok"


def env_record(caplog: pytest.LogCaptureFixture) -> logging.LogRecord:
    """The single record a rollout logged on ``benchmax.envs.base.env``."""
    (record,) = [r for r in caplog.records if r.name == "benchmax.envs.base.env"]
    return record


def assert_env_record(
    caplog: pytest.LogCaptureFixture,
    message: str,
    *,
    level: int = logging.ERROR,
    exc_type: type[BaseException] | None = None,
) -> None:
    """The rollout logged exactly ``message`` at ``level``, with a traceback of
    ``exc_type`` (or none when ``exc_type`` is ``None``)."""
    record = env_record(caplog)
    assert record.getMessage() == message
    assert record.levelno == level
    if exc_type is None:
        assert record.exc_info is None
    else:
        assert record.exc_info is not None and isinstance(record.exc_info[1], exc_type)


def open_sockets() -> int:
    """How many sockets this process holds open."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                count += 1
        except OSError:
            continue
    return count


@asynccontextmanager
async def fixed_response_server(
    status: int, body: bytes, *, headers: bytes = b""
) -> AsyncIterator[str]:
    """A minimal HTTP/1.1 server answering every request with ``status``, a JSON
    ``body`` and extra raw ``headers`` lines (for response shapes MockModelServer
    does not produce); yields its origin."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            await reader.readexactly(length)
            writer.write(
                b"HTTP/1.1 %d Error\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\nConnection: close\r\n%s\r\n%s"
                % (status, len(body), headers, body)
            )
            await writer.drain()
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()
        await server.wait_closed()
