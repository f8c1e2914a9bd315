"""One OpenEnv episode over openenv-core's own WebSocket client, and the action schema.

``EpisodeSession`` holds a ``GenericEnvClient`` (one server session per WebSocket
connection, as OpenEnv's ``/ws`` gives) for one rollout: ``open`` connects and resets,
``step`` sends one action, ``close`` ends the session. Every failure of the server (it
refused the connection, answered with an error message, closed the socket, or did not
answer within ``step_timeout``) is raised as ``EpisodeError`` with the server's words.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from benchmax.sources._peers import import_peer

__all__ = ["EpisodeError", "EpisodeSession", "StepOutcome", "action_text_field", "http_root"]

_CLOSE_SECONDS = 10.0


class EpisodeError(Exception):
    """The OpenEnv server could not be reached or refused a request (one line)."""


@dataclass(frozen=True, slots=True)
class StepOutcome:
    """One ``reset``/``step`` answer: the observation object, its reward and ``done``."""

    observation: dict[str, Any]
    reward: float | None
    done: bool


@dataclass
class EpisodeSession:
    """The live episode of one rollout (see the module docstring)."""

    base_url: str
    connect_timeout: float
    step_timeout: float
    rewards: list[float] = field(default_factory=list)
    done: bool = False
    tools: list[dict[str, Any]] = field(default_factory=list)
    _client: Any = None

    async def open(self, reset_args: Mapping[str, Any]) -> StepOutcome:
        """Connect and ``reset(**reset_args)``; the reset's reward is not an action's."""
        core = import_peer(
            "openenv.core", distribution="openenv-core", extra="openenv", needed_by="OpenEnvEnv"
        )
        self._client = core.GenericEnvClient(
            base_url=self.base_url,
            connect_timeout_s=self.connect_timeout,
            message_timeout_s=self.step_timeout,
        )
        try:
            await self._client.connect()
        except Exception as error:
            raise EpisodeError(_said(error)) from error
        outcome = await self._call("reset", dict(reset_args))
        self.done = outcome.done
        return outcome

    async def step(self, action: Mapping[str, Any]) -> StepOutcome:
        """Send one action; its reward (``None`` counts 0.0) joins ``rewards``."""
        outcome = await self._call("step", dict(action))
        self.rewards.append(0.0 if outcome.reward is None else outcome.reward)
        self.done = self.done or outcome.done
        return outcome

    async def list_tools(self) -> list[dict[str, Any]]:
        """The MCP tools of an MCP environment (a ``list_tools`` action), as OpenAI
        function tools; not an action of the episode (no reward is recorded)."""
        outcome = await self._call("step", {"type": "list_tools"})
        listed = outcome.observation.get("tools")
        if not isinstance(listed, list):
            raise EpisodeError("the list_tools observation has no 'tools' list")
        tools: list[dict[str, Any]] = []
        for entry in listed:
            if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
                raise EpisodeError(
                    f"the list_tools observation lists a tool without a name: {entry!r}"
                )
            schema = entry.get("input_schema")
            function: dict[str, Any] = {"name": entry["name"]}
            if isinstance(entry.get("description"), str) and entry["description"]:
                function["description"] = entry["description"]
            function["parameters"] = (
                dict(schema) if isinstance(schema, Mapping) else {"type": "object"}
            )
            tools.append({"type": "function", "function": function})
        self.tools = tools
        return tools

    async def close(self) -> None:
        """End the server session (best effort, bounded); safe to call twice."""
        client, self._client = self._client, None
        if client is None:
            return
        try:
            async with asyncio.timeout(_CLOSE_SECONDS):
                await client.close()
        except Exception:  # the server is gone already: nothing left to end
            pass

    async def _call(self, kind: str, data: dict[str, Any]) -> StepOutcome:
        if self._client is None:
            raise EpisodeError("the episode is not open")
        try:
            result = await (
                self._client.reset(**data) if kind == "reset" else self._client.step(data)
            )
        except TimeoutError:
            raise EpisodeError(
                f"{kind}: no answer within step_timeout={self.step_timeout:g}s"
            ) from None
        except Exception as error:
            if type(error).__name__.startswith("ConnectionClosed"):  # websockets' own errors
                raise EpisodeError(
                    f"{kind}: the server closed the WebSocket session before answering "
                    f"({_said(error)}); an OpenEnv server past its max_concurrent_envs closes "
                    "new sessions this way (CAPACITY_REACHED)"
                ) from error
            raise EpisodeError(f"{kind}: {_said(error)}") from error
        observation = result.observation
        if not isinstance(observation, dict):
            raise EpisodeError(f"{kind}: the observation is not an object: {observation!r}")
        reward = result.reward
        if reward is not None:
            if isinstance(reward, bool) or not isinstance(reward, int | float):
                raise EpisodeError(f"{kind}: the reward is not a number: {reward!r}")
            if not math.isfinite(reward):
                raise EpisodeError(f"{kind}: the reward is not finite: {reward!r}")
            reward = float(reward)
        return StepOutcome(observation=observation, reward=reward, done=bool(result.done))


def http_root(base_url: str) -> str:
    """``base_url`` as the server's HTTP root (``ws://`` becomes ``http://``), no slash."""
    url = base_url.rstrip("/")
    if url.startswith("ws://"):
        return "http://" + url[len("ws://") :]
    if url.startswith("wss://"):
        return "https://" + url[len("wss://") :]
    return url


async def action_text_field(base_url: str, timeout: float) -> str:
    """The one field of the server's action schema (``GET /schema``) a text reply fills:
    its one required field besides ``metadata``, else its one property besides it.

    Raises ``EpisodeError`` when the server does not answer or the schema has no single
    such field (the message lists the fields, for ``message_field``).
    """
    url = f"{http_root(base_url)}/schema"
    try:
        async with httpx.AsyncClient(timeout=timeout) as client:
            response = await client.get(url)
        response.raise_for_status()
        schema = response.json()["action"]
    except Exception as error:
        raise EpisodeError(f"cannot read the action schema from {url}: {_said(error)}") from error
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping):
        raise EpisodeError(f"the action schema at {url} has no properties")
    names = [name for name in properties if name != "metadata"]
    required = [name for name in schema.get("required", ()) if name in names]
    if len(required) == 1:
        return str(required[0])
    if len(names) == 1:
        return str(names[0])
    raise EpisodeError(
        f"the action schema at {url} has no single text field (fields: "
        f"{', '.join(names) or 'none'}): pass message_field"
    )


def _said(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
