"""One OpenEnv episode over OpenEnv's WebSocket protocol, and the action schema.

``EpisodeSession`` speaks to the server's ``/ws`` route exactly as openenv-core's own
``EnvClient`` does (one server session per connection; JSON messages ``{"type": "reset",
"data": {...}}``, ``{"type": "step", "data": action}`` and ``{"type": "close"}``, answered
by ``{"type": "observation", "data": {"observation", "reward", "done"}}`` or ``{"type":
"error", "data": {"message", "code"}}``), with the ``websockets`` library and without
importing openenv-core (whose import brings in gradio: tens of seconds). ``open``
connects and resets, ``step`` sends one action, ``close`` ends the session. Every
failure of the server (it refused the connection, answered with an error message such
as ``CAPACITY_REACHED``, closed the socket, or did not answer within ``step_timeout``)
is raised as ``EpisodeError`` with the server's words.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import httpx

from benchmax.sources._errors import SourceError
from benchmax.sources._peers import import_peer

if TYPE_CHECKING:
    from websockets.asyncio.client import ClientConnection

__all__ = [
    "EpisodeError",
    "EpisodeSession",
    "StepOutcome",
    "action_text_field",
    "http_root",
    "websocket_url",
]

_CLOSE_SECONDS = 10.0
_HANDSHAKE_CLOSE_SECONDS = 1.0
"""The most seconds websockets waits for the server's close frame before cutting the
connection (its own default is 10)."""
_MAX_MESSAGE_BYTES = 100 * 1024 * 1024  # as openenv-core's client


class EpisodeError(SourceError):
    """The OpenEnv server could not be reached or refused a request (one line)."""


@dataclass(frozen=True, slots=True)
class StepOutcome:
    """One ``reset``/``step`` answer: the observation object, its reward and ``done``."""

    observation: dict[str, object]
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
    tools: list[dict[str, object]] = field(default_factory=list)
    _socket: ClientConnection | None = None
    _hung: bool = False

    async def open(self, reset_args: Mapping[str, object]) -> StepOutcome:
        """Connect and ``reset(**reset_args)``; the reset's reward is not an action's."""
        client = import_peer(
            "websockets.asyncio.client",
            distribution="websockets",
            extra="openenv",
            needed_by="OpenEnvEnv",
        )
        url = websocket_url(self.base_url)
        loopback = urlsplit(url).hostname in ("localhost", "127.0.0.1", "::1")
        options: dict[str, object] = {"proxy": None} if loopback else {}  # as openenv-core's client
        try:
            self._socket = await client.connect(
                url,
                open_timeout=self.connect_timeout,
                close_timeout=_HANDSHAKE_CLOSE_SECONDS,
                max_size=_MAX_MESSAGE_BYTES,
                **options,
            )
        except Exception as error:
            raise EpisodeError(f"cannot connect to {url}: {_said(error)}") from error
        outcome = await self._call("reset", dict(reset_args))
        self.done = outcome.done
        return outcome

    async def step(self, action: Mapping[str, object]) -> StepOutcome:
        """Send one action; its reward (``None`` counts 0.0) joins ``rewards``."""
        outcome = await self._call("step", dict(action))
        self.rewards.append(0.0 if outcome.reward is None else outcome.reward)
        self.done = self.done or outcome.done
        return outcome

    async def list_tools(self) -> list[dict[str, object]]:
        """The MCP tools of an MCP environment (a ``list_tools`` action), as OpenAI
        function tools; not an action of the episode (no reward is recorded)."""
        outcome = await self._call("step", {"type": "list_tools"})
        listed = outcome.observation.get("tools")
        if not isinstance(listed, list):
            raise EpisodeError("the list_tools observation has no 'tools' list")
        tools: list[dict[str, object]] = []
        for entry in listed:
            if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
                raise EpisodeError(
                    f"the list_tools observation lists a tool without a name: {entry!r}"
                )
            schema = entry.get("input_schema")
            function: dict[str, object] = {"name": entry["name"]}
            if isinstance(entry.get("description"), str) and entry["description"]:
                function["description"] = entry["description"]
            function["parameters"] = (
                dict(schema) if isinstance(schema, Mapping) else {"type": "object"}
            )
            tools.append({"type": "function", "function": function})
        self.tools = tools
        return tools

    async def close(self) -> None:
        """End the server session (best effort, bounded); safe to call twice.

        Sends ``close`` and lets the server close the socket first, as its ``/ws`` route
        expects (a client that closes first makes openenv-core log a traceback). After a
        step that timed out the server is not waited for: the socket is closed at once
        (websockets' close handshake, at most 1 s)."""
        socket, self._socket = self._socket, None
        if socket is None:
            return
        if self._hung:
            try:
                await socket.close()
            except Exception:
                pass
            return
        try:
            async with asyncio.timeout(_CLOSE_SECONDS):
                await socket.send(json.dumps({"type": "close"}))
                await socket.wait_closed()
        except Exception:  # the server is gone already, or slow to go: close our end
            pass
        finally:
            try:
                await socket.close()
            except Exception:
                pass

    async def _call(self, kind: str, data: dict[str, object]) -> StepOutcome:
        if self._socket is None:
            raise EpisodeError("the episode is not open")
        try:
            async with asyncio.timeout(self.step_timeout):
                try:
                    await self._socket.send(json.dumps({"type": kind, "data": data}))
                except Exception as error:
                    if not _closed(error):
                        raise
                    # A server refusing the session (CAPACITY_REACHED) says why, then
                    # closes: its message may still be waiting to be read.
                reply = json.loads(await self._socket.recv())
        except TimeoutError:
            self._hung = True
            raise EpisodeError(
                f"{kind}: no answer within step_timeout={self.step_timeout:g}s"
            ) from None
        except ValueError as error:
            raise EpisodeError(f"{kind}: the answer is not JSON: {error}") from None
        except Exception as error:
            if _closed(error):
                raise EpisodeError(
                    f"{kind}: the server closed the WebSocket session before answering "
                    f"({_said(error)})"
                ) from error
            raise EpisodeError(f"{kind}: {_said(error)}") from error
        if not isinstance(reply, dict) or not isinstance(reply.get("data"), dict):
            raise EpisodeError(f"{kind}: the answer is not an OpenEnv message: {reply!r:.200}")
        body = reply["data"]
        if reply.get("type") == "error":
            code = body.get("code", "UNKNOWN")
            raise EpisodeError(f"{kind}: the server answered {code}: {body.get('message', '')}")
        if reply.get("type") != "observation":
            raise EpisodeError(f"{kind}: unexpected answer type {reply.get('type')!r}")
        observation = body.get("observation", {})
        if not isinstance(observation, dict):
            raise EpisodeError(f"{kind}: the observation is not an object: {observation!r:.200}")
        reward = body.get("reward")
        if reward is not None:
            if isinstance(reward, bool) or not isinstance(reward, int | float):
                raise EpisodeError(f"{kind}: the reward is not a number: {reward!r}")
            if not math.isfinite(reward):
                raise EpisodeError(f"{kind}: the reward is not finite: {reward!r}")
            reward = float(reward)
        return StepOutcome(observation=observation, reward=reward, done=bool(body.get("done")))


def websocket_url(base_url: str) -> str:
    """The ``/ws`` route of ``base_url`` (``http`` becomes ``ws``, ``https`` ``wss``)."""
    url = base_url.rstrip("/")
    if url.startswith("http://"):
        url = "ws://" + url[len("http://") :]
    elif url.startswith("https://"):
        url = "wss://" + url[len("https://") :]
    return f"{url}/ws"


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


def _closed(error: BaseException) -> bool:
    """Whether ``error`` is websockets' ``ConnectionClosed`` (or a subclass)."""
    return any(cls.__name__ == "ConnectionClosed" for cls in type(error).__mro__)


def _said(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
