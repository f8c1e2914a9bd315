"""Fixtures for tool tests: a small BaseEnv family, requests, and a tool provider that
records its sessions (the ``ToolProvider`` seam, without a server behind it)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmax.auth import StaticBearerAuth
from benchmax.envs.base.env import BaseEnv, BaseRollout
from benchmax.envs.dataset import Dataset
from benchmax.envs.shared_types import Example, RewardMap, RolloutRequest
from benchmax.testing import MockModelServer
from benchmax.tools import ToolError

PROMPT = [{"role": "user", "content": "Use the tools, then answer."}]


class ToolsEnv(BaseEnv):
    """Reward ``tool_messages``: how many tool messages the transcript holds."""

    reward_keys = ("tool_messages",)
    max_turns = 4

    async def create_dataset(
        self, split: Any, base_dir: Path, *, max_examples: int | None = None
    ) -> Dataset[dict[str, Any]]:
        return Dataset([Example(id="e", payload={"prompt_messages": PROMPT})])

    async def compute_reward(self, rollout: BaseRollout) -> RewardMap | None:
        return {"tool_messages": float(sum(m["role"] == "tool" for m in rollout.messages))}


def request(
    server: MockModelServer, rollout_id: str = "r0", payload: dict[str, Any] | None = None
) -> RolloutRequest[dict[str, Any]]:
    """A request whose base URL is its own session on ``server``."""
    return RolloutRequest(
        rollout_id=rollout_id,
        example=Example(id="e", payload={"prompt_messages": PROMPT, **(payload or {})}),
        model="test-model",
        base_url=server.session_url(rollout_id),
        model_auth=StaticBearerAuth("k"),
    )


def tool_messages(rollout: BaseRollout) -> list[Any]:
    return [m["content"] for m in rollout.messages if m["role"] == "tool"]


ECHO_SPEC = {
    "type": "function",
    "function": {
        "name": "remote_echo",
        "description": "Echo the text back.",
        "parameters": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
    },
}


@dataclass
class RecordingSession:
    """A ``ToolSession`` answering ``remote_echo``; ``hang``/``fail`` make calls misbehave."""

    rollout_id: str
    log: list[tuple[str, str]]
    hang: bool = False
    fail: bool = False
    calls: list[dict[str, Any]] = field(default_factory=list)

    async def list_tools(self) -> list[dict[str, Any]]:
        return [ECHO_SPEC]

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        self.calls.append(arguments)
        if self.hang:
            await asyncio.sleep(60)
        if self.fail:
            raise ConnectionResetError("server went away")
        if arguments["text"] == "forbidden":
            raise ToolError("that text is not allowed")
        return [{"type": "text", "text": f"{self.rollout_id}:{arguments['text']}"}]

    async def aclose(self) -> None:
        self.log.append(("close", self.rollout_id))


@dataclass
class RecordingProvider:
    """A ``ToolProvider`` opening a ``RecordingSession`` per rollout and logging
    opens and closes; ``refuse`` fails every open, ``slow_open`` delays it."""

    log: list[tuple[str, str]] = field(default_factory=list)
    sessions: list[RecordingSession] = field(default_factory=list)
    refuse: bool = False
    slow_open: float = 0.0
    hang: bool = False
    fail: bool = False

    async def open_session(self, rollout_id: str) -> RecordingSession:
        if self.slow_open:
            await asyncio.sleep(self.slow_open)
        if self.refuse:
            raise ConnectionRefusedError("connection refused")
        self.log.append(("open", rollout_id))
        session = RecordingSession(rollout_id, self.log, hang=self.hang, fail=self.fail)
        self.sessions.append(session)
        return session


def requests_for(server: MockModelServer, ids: Sequence[str]) -> list[RolloutRequest[Any]]:
    return [request(server, rollout_id) for rollout_id in ids]


# Throwaway projects and fresh interpreters, as the bundle tests use them.
from tests.bundle.conftest import (  # noqa: E402
    by_value_registry_untouched,  # noqa: F401
    projects,  # noqa: F401
    run_fresh,  # noqa: F401
)
