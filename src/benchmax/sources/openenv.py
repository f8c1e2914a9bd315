"""An OpenEnv environment server as a benchmax environment: ``OpenEnvEnv(base_url)``.

OpenEnv (openenv-core) serves environments over HTTP and WebSocket; this environment
plays one OpenEnv episode per rollout over the server's ``/ws`` route (one server
session per connection, OpenEnv's ``reset``/``step``/``close`` messages exactly as
openenv-core's ``EnvClient`` sends them; ``pip install 'benchmax[openenv]'`` installs
the ``websockets`` client, not openenv-core), with the model as the agent::

    uv run benchmax run benchmax.sources.openenv:OpenEnvEnv \\
        --env-arg base_url=http://127.0.0.1:8000 --base-url http://localhost:8001/v1

Episodes. Each split has ``episodes`` examples (``eval_episodes`` for eval, default the
same); example ``i`` resets the server with ``seed = seed + i`` (eval: ``seed + 10**9 +
i``) plus ``reset_args``, and its id is the canonical id of those reset arguments. The
dataset's prompt is a placeholder: the rollout starts by connecting, calling ``reset`` and
sending its observation as the first user message. Rollouts of one group share the
episode only when the server's ``reset`` honours ``seed``.

Turns. The observation becomes message text as JSON (``observation_field`` picks one of
its fields instead), after ``system_prompt`` when one is given. Each assistant reply
without tool calls is one action: its text, without ``<think>`` reasoning, in the
action's ``message_field`` (by default the one required field of the server's
``/schema`` action, e.g. ``message`` for the echo template), plus ``action_args``. The
next observation joins the transcript as the next user message (marked
``simulated_user``), until an observation says ``done``, which ends the rollout as
``finished``. An episode still running when ``max_turns`` (default 8) model calls are
spent ends as ``max_turns_exceeded`` (zero reward).

MCP environments. With ``mcp_tools=True`` the tools the server lists (a
``list_tools`` action after reset) are the model's tools and each tool call is a
``call_tool`` action: the model sees its ``result`` (the text of an MCP result's
content blocks), or its ``error`` as a tool error; a text reply then ends the rollout
without an action.

Reward. One key, ``reward``: the sum of the rewards of the episode's actions (``None``
counts 0.0; the reset's reward is not an action's). Operational failures settle the
rollout with zero reward: a server that cannot be reached or refuses the session or the
reset (``CAPACITY_REACHED``, ...) as ``setup_error``, a step the server refuses, cannot answer
within ``step_timeout`` (its socket is then closed within 1 s, the server not waited on)
or answers with a non-finite reward as ``environment_error``.

Errors. A bad argument raises ``ValueError`` (``TypeError`` for a wrong type) naming it;
other keyword arguments are ``BaseEnv``'s settings (``max_turns``, ``model_timeout``...).
"""

from __future__ import annotations

import contextvars
import dataclasses
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, cast
from urllib.parse import urlsplit

from benchmax._value_checks import is_finite_number
from benchmax.envs import (
    BaseRollout,
    DatasetSplit,
    Example,
    JsonRow,
    RolloutFailure,
    RolloutRequest,
    Tool,
    canonical_example_id,
)
from benchmax.envs.shared_types import SETUP_ERROR
from benchmax.rewards.text import message_text, without_reasoning
from benchmax.sources._arguments import checked_object
from benchmax.sources._base import EVAL_SEED_OFFSET, SeededSourceEnv
from benchmax.sources._openenv_session import (
    EpisodeError,
    EpisodeSession,
    action_text_field,
)

__all__ = ["ENVIRONMENT_ERROR", "EVAL_SEED_OFFSET", "REWARD_KEY", "OpenEnvEnv"]

logger = logging.getLogger(__name__)

ENVIRONMENT_ERROR = "environment_error"
"""Termination reason of a rollout whose OpenEnv step failed (an operational failure)."""

REWARD_KEY = "reward"
"""The one reward key: the sum of the episode's action rewards."""

_CURRENT: contextvars.ContextVar[EpisodeSession | None] = contextvars.ContextVar(
    "benchmax_openenv_episode", default=None
)


class OpenEnvEnv(SeededSourceEnv):
    """An OpenEnv server at ``base_url`` (``http(s)://`` or ``ws(s)://`` root), one
    episode per rollout; see the module docstring for episodes, turns and rewards."""

    source_name = "OpenEnvEnv"
    payload_key = "openenv"
    process_local: ClassVar[tuple[str, ...]] = (
        "_episodes",
    )  # live connections stay with their process
    reward_keys = (REWARD_KEY,)
    max_turns: int | None = 8

    def __init__(
        self,
        base_url: str,
        *,
        episodes: int = 16,
        eval_episodes: int | None = None,
        seed: int = 0,
        reset_args: Mapping[str, object] | None = None,
        message_field: str | None = None,
        action_args: Mapping[str, object] | None = None,
        observation_field: str | None = None,
        system_prompt: str | None = None,
        mcp_tools: bool = False,
        connect_timeout: float = 30.0,
        step_timeout: float = 60.0,
        **settings: Any,
    ) -> None:
        super().__init__(**settings)
        self.base_url = _checked_url(base_url)
        self.episodes, self.eval_episodes = self._set_seeded_splits(
            episodes, eval_episodes, seed, names=("episodes", "eval_episodes")
        )
        self.reset_args = _checked_object("reset_args", reset_args)
        for reserved in ("seed", "episode_id"):
            if reserved in self.reset_args:
                raise ValueError(
                    f"OpenEnvEnv reset_args must not set {reserved!r} (benchmax sets it)"
                )
        self.message_field = _checked_name("message_field", message_field)
        self.action_args = _checked_object("action_args", action_args)
        self.observation_field = _checked_name("observation_field", observation_field)
        self.system_prompt = self._checked_text("system_prompt", system_prompt) or None
        if not isinstance(mcp_tools, bool):
            raise TypeError("OpenEnvEnv mcp_tools must be True or False")
        self.mcp_tools = mcp_tools
        self.connect_timeout = _checked_seconds("connect_timeout", connect_timeout)
        self.step_timeout = _checked_seconds("step_timeout", step_timeout)
        self._text_field: str | None = self.message_field
        self._start_process_state()

    def _start_process_state(self) -> None:
        self._episodes: dict[str, EpisodeSession] = {}

    def _examples(self, split: DatasetSplit, max_examples: int | None) -> list[Example[JsonRow]]:
        """One example per episode seed (no server is reached)."""
        _, count = self._split_count(split, max_examples)
        first = self.split_seed(split)
        return [self._example(first + index) for index in range(count)]

    def _example(self, seed: int) -> Example[JsonRow]:
        reset = {"seed": seed, **self.reset_args}
        placeholder = f"(the observation of OpenEnv reset {json.dumps(reset, sort_keys=True)})"
        payload: JsonRow = {
            "prompt_messages": self._prompt(self.system_prompt, placeholder),
            self.payload_key: {"reset": reset},
        }
        return Example(id=canonical_example_id({self.payload_key: reset}), payload=payload)

    async def run_rollout(self, request: RolloutRequest[JsonRow]) -> BaseRollout:
        """Open the episode (connect, reset), run the chat loop on its first
        observation, then end the server session."""
        payload = request.example.payload
        source = self._source_record(payload) if isinstance(payload, Mapping) else None
        reset = None if source is None else source.get("reset")
        if not isinstance(reset, Mapping):
            raise ValueError(f"OpenEnvEnv example payload needs an {self.payload_key!r} object")
        episode = EpisodeSession(self.base_url, self.connect_timeout, self.step_timeout)
        try:
            try:
                first = await self._opened(episode, reset, request.rollout_id)
            except EpisodeError as error:
                logger.error(
                    "openenv.setup_failed rollout_id=%s termination_reason=%s: %s at %s",
                    request.rollout_id,
                    SETUP_ERROR,
                    error,
                    self.base_url,
                )
                return BaseRollout(
                    rollout_id=request.rollout_id,
                    termination_reason=SETUP_ERROR,
                    rewards=dict.fromkeys(self.reward_keys, 0.0),
                    messages=list(payload["prompt_messages"]),
                    example_args={k: v for k, v in payload.items() if k != "prompt_messages"},
                    split=request.split,
                )
            prompt = self._prompt(self.system_prompt, first)
            example = Example(id=request.example.id, payload={**payload, "prompt_messages": prompt})
            self._episodes[request.rollout_id] = episode
            token = _CURRENT.set(episode)
            try:
                return await super().run_rollout(dataclasses.replace(request, example=example))
            finally:
                _CURRENT.reset(token)
                self._episodes.pop(request.rollout_id, None)
        finally:
            await episode.close()

    async def _opened(
        self, episode: EpisodeSession, reset: Mapping[str, object], rollout_id: str
    ) -> str:
        """Connect and reset (``episode_id`` is the rollout id); the first observation's text."""
        if not self.mcp_tools and self._text_field is None:
            self._text_field = await action_text_field(self.base_url, self.connect_timeout)
        outcome = await episode.open({**reset, "episode_id": rollout_id[:255]})
        if outcome.done:
            raise EpisodeError("the episode was already done after reset")
        if self.mcp_tools:
            await episode.list_tools()
        return self._observation_text(outcome.observation)

    def _observation_text(self, observation: Mapping[str, object]) -> str:
        if self.observation_field is None:
            return json.dumps(observation, ensure_ascii=False)
        if self.observation_field not in observation:
            raise EpisodeError(
                f"the observation has no field {self.observation_field!r} (observation_field); "
                f"it has {', '.join(observation) or 'none'}"
            )
        value = observation[self.observation_field]
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        return text if text.strip() else "(empty observation)"

    async def list_tools(self) -> list[Tool]:
        """The episode's MCP tools (``mcp_tools=True``), inside a rollout; else none."""
        episode = _CURRENT.get()
        if episode is None or not self.mcp_tools:
            return []
        return [cast(Tool, dict(tool)) for tool in episode.tools]

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        """One ``call_tool`` action: the tool's result, or its error as a ``ToolError``."""
        from benchmax.tools import ToolError

        episode = self._episodes.get(rollout_id)
        if episode is None or not self.mcp_tools:
            raise ValueError(f"Unknown tool: {tool_name}")
        if episode.done:
            raise ToolError("the episode is over")
        action = {"type": "call_tool", "tool_name": tool_name, "arguments": tool_args}
        try:
            outcome = await episode.step(action)
        except EpisodeError as error:
            raise RolloutFailure(
                ENVIRONMENT_ERROR, f"OpenEnv call_tool {tool_name}: {error}"
            ) from error
        observation = outcome.observation
        if observation.get("error"):
            error_value = observation["error"]
            message = (
                error_value.get("message") if isinstance(error_value, Mapping) else error_value
            )
            raise ToolError(str(message))
        result = observation.get("result")
        text = _mcp_result_text(result)
        if isinstance(result, Mapping) and result.get("is_error"):
            raise ToolError(text if text is not None else json.dumps(result, default=str))
        return result if text is None else text

    async def user_turn(
        self,
        rollout_id: str,
        messages: Sequence[Mapping[str, object]],
        example: Example[JsonRow],
    ) -> str | None:
        """Step the episode with the reply's text; the next observation, or ``None``
        once the episode is done (with ``mcp_tools``, a text reply ends it)."""
        episode = self._episodes.get(rollout_id)
        if episode is None or episode.done or self.mcp_tools:
            return None
        assert self._text_field is not None  # read from /schema when the episode opened
        reply = without_reasoning(message_text(messages[-1].get("content"))).strip()
        action = {**self.action_args, self._text_field: reply}
        try:
            outcome = await episode.step(action)
            if outcome.done:
                return None
            return self._observation_text(outcome.observation)
        except EpisodeError as error:
            raise RolloutFailure(ENVIRONMENT_ERROR, f"OpenEnv step: {error}") from error

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        """``{"reward": sum of the episode's action rewards}``."""
        episode = self._episodes.get(rollout.rollout_id)
        return {REWARD_KEY: 0.0 if episode is None else float(sum(episode.rewards))}


def _mcp_result_text(result: object) -> str | None:
    """The text blocks of an MCP ``CallToolResult`` (``{"content": [{"type": "text",
    "text": ...}, ...], ...}``), joined by newlines; ``None`` for any other result."""
    content = result.get("content") if isinstance(result, Mapping) else None
    if not isinstance(content, list) or not content:
        return None
    texts = [
        block["text"]
        for block in content
        if isinstance(block, Mapping)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    ]
    return "\n".join(texts) if len(texts) == len(content) else None


def _checked_url(base_url: object) -> str:
    if not isinstance(base_url, str):
        raise TypeError(f"OpenEnvEnv base_url must be a URL string, not {base_url!r}")
    try:
        parts = urlsplit(base_url.strip())
        valid = parts.scheme in ("http", "https", "ws", "wss") and bool(parts.hostname)
    except ValueError:
        valid = False
    if not valid:
        raise ValueError(
            f"OpenEnvEnv base_url {base_url!r} must be an http(s):// or ws(s):// URL such as "
            "http://127.0.0.1:8000"
        )
    return base_url.strip().rstrip("/")


def _checked_object(name: str, value: object) -> dict[str, object]:
    return checked_object("OpenEnvEnv", name, value, json_data=True)


def _checked_name(name: str, value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise TypeError(f"OpenEnvEnv {name} must be a field name (a string), not {value!r}")
    return value


def _checked_seconds(name: str, value: object) -> float:
    if not is_finite_number(value) or value <= 0:
        raise ValueError(f"OpenEnvEnv {name} must be a positive number of seconds, not {value!r}")
    return float(value)
