"""``BaseEnv``: a reusable OpenAI-compatible chat loop with optional function tools."""

from __future__ import annotations

import asyncio
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmax._value_checks import is_finite_number, is_int_at_least
from benchmax.auth import ModelRequestContext
from benchmax.envs._observer import RolloutReport, observing, report_rollout
from benchmax.envs.base._tool_calls import (
    ToolTimedOut,
    advertised_tool_names,
    assistant_message,
    function_tool_calls,
    tool_arguments,
    tool_content,
)
from benchmax.envs.base.dataset import JsonRow
from benchmax.envs.base.openai_types import Message, Messages, Tool
from benchmax.envs.dataset import Dataset
from benchmax.envs.environment import Environment
from benchmax.envs.shared_types import (
    DatasetSplit,
    Example,
    RewardMap,
    RolloutAttempt,
    RolloutFailure,
    RolloutRequest,
)

if TYPE_CHECKING:  # imported on first use: aiohttp costs a quarter second to import
    from benchmax._modelhttp.chat import ChatSession
    from benchmax._modelhttp.connections import PoolLease

__all__ = ["BaseEnv", "BaseRollout"]

logger = logging.getLogger(__name__)

_POOL_LEASE_ATTRIBUTE = "_benchmax_model_pool_lease"
_TIMEOUT_NAMES = ("model_timeout", "tool_timeout", "rollout_timeout")


@dataclass(frozen=True, slots=True, kw_only=True)
class BaseRollout(RolloutAttempt):
    """A finished ``BaseEnv`` rollout: its transcript and the example's other fields."""

    messages: Messages
    example_args: Mapping[str, Any]
    split: DatasetSplit = "train"


@dataclass(frozen=True, slots=True)
class _Settings:
    """The limits in effect for one rollout, read once when it starts."""

    max_turns: int
    max_tool_calls: int | None
    model_timeout: float | None
    tool_timeout: float | None
    rollout_timeout: float | None
    model_retries: int


class _Stopwatch:
    """Time spent waiting on the model, in tools and in ``compute_reward``."""

    __slots__ = ("model", "reward", "tool")

    def __init__(self) -> None:
        self.model = 0.0
        self.tool = 0.0
        self.reward = 0.0

    @contextmanager
    def timing(self, part: str) -> Iterator[None]:
        """Add the time spent in the ``with`` block to ``part``."""
        started = time.perf_counter()
        try:
            yield
        finally:
            setattr(self, part, getattr(self, part) + time.perf_counter() - started)


def _timed(stopwatch: _Stopwatch | None, part: str) -> AbstractContextManager[None]:
    """Time ``part`` when a runner observes rollouts; nothing otherwise."""
    return nullcontext() if stopwatch is None else stopwatch.timing(part)


class BaseEnv(Environment[JsonRow, BaseRollout], ABC):
    """A reusable OpenAI-compatible chat loop with optional function tools.

    Example payloads are JSON objects whose reserved ``prompt_messages`` field
    opens the transcript; every other field reaches the reward hooks as
    ``example_args``. Subclasses declare ``reward_keys``, ``max_turns`` and
    ``create_dataset``, and usually ``compute_reward``; tools come from
    ``list_tools`` and ``run_tool``.

    Beyond the 0.2 limits, ``model_timeout``, ``tool_timeout`` and
    ``rollout_timeout`` (seconds, or ``None`` for none) end a rollout with the
    reason of the same name, and ``model_retries`` retries transient model
    failures (connection errors, timeouts, HTTP 408/409/429/5xx) with backoff.
    """

    max_turns: int | None = None
    max_tool_calls: int | None = None
    model_timeout: float | None = None
    tool_timeout: float | None = None
    rollout_timeout: float | None = None
    model_retries: int = 0

    def __init__(
        self,
        *,
        max_turns: int | None = None,
        max_tool_calls: int | None = None,
        model_timeout: float | None = None,
        tool_timeout: float | None = None,
        rollout_timeout: float | None = None,
        model_retries: int | None = None,
    ) -> None:
        """Override class-level limits; a ``None`` argument keeps the class value."""
        super().__init__()
        overrides = {
            "max_turns": max_turns,
            "max_tool_calls": max_tool_calls,
            "model_timeout": model_timeout,
            "tool_timeout": tool_timeout,
            "rollout_timeout": rollout_timeout,
            "model_retries": model_retries,
        }
        for name, value in overrides.items():
            if value is not None:
                setattr(self, name, value)
        self._validate_limits()

    def _validate_limits(self) -> None:
        max_turns = self.max_turns
        if max_turns is not None and not is_int_at_least(max_turns, 1):
            raise ValueError("max_turns must be a positive integer")
        max_tool_calls = self.max_tool_calls
        if max_tool_calls is not None and not is_int_at_least(max_tool_calls, 0):
            raise ValueError("max_tool_calls must be a non-negative integer")
        for name in _TIMEOUT_NAMES:
            value = getattr(self, name)
            if value is not None and not (is_finite_number(value) and value > 0):
                raise ValueError(f"{name} must be a positive number or None")
        retries = self.model_retries
        if not is_int_at_least(retries, 0):
            raise ValueError("model_retries must be a non-negative integer")

    @abstractmethod
    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> Dataset[JsonRow]:
        """Return the split's examples; payloads must contain ``prompt_messages``."""

    async def list_tools(self) -> list[Tool]:
        """Tools advertised to the model (OpenAI function-tool dicts); none by default."""
        return []

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        """Run one advertised tool with the model's keyword arguments."""
        raise ValueError(f"Unknown tool: {tool_name}")

    async def compute_reward(self, rollout: BaseRollout) -> RewardMap | None:
        """Score one finished rollout; ``None`` leaves scoring to the group hook."""
        return None

    async def compute_group_rewards(
        self, rollouts: Sequence[BaseRollout]
    ) -> Mapping[str, RewardMap] | None:
        """Return per-rollout rewards that depend on the whole group, or ``None``."""
        return None

    @asynccontextmanager
    async def rollout_context(
        self, rollout_id: str, example: Example[JsonRow]
    ) -> AsyncIterator[None]:
        """Hold per-rollout resources (a sandbox, a scratch directory); nothing by default."""
        yield

    async def aclose(self) -> None:
        """Release this environment's pooled model connections on the running loop."""
        lease = vars(self).get(_POOL_LEASE_ATTRIBUTE)
        if lease is not None:
            await lease.aclose()

    def _model_pool(self) -> PoolLease:
        # Created lazily: subclasses may skip __init__, and instances are pickled.
        state = vars(self)
        lease = state.get(_POOL_LEASE_ATTRIBUTE)
        if lease is None:
            from benchmax._modelhttp.connections import PoolLease

            lease = state.setdefault(_POOL_LEASE_ATTRIBUTE, PoolLease())
        return lease

    async def run_rollout(self, request: RolloutRequest[JsonRow]) -> BaseRollout:
        """Run the chat/tool loop for one request, then score it."""
        self._validate_limits()
        if self.max_turns is None:
            raise ValueError(f"{type(self).__name__} must configure max_turns before rollout")
        settings = _Settings(
            max_turns=self.max_turns,
            max_tool_calls=self.max_tool_calls,
            model_timeout=self.model_timeout,
            tool_timeout=self.tool_timeout,
            rollout_timeout=self.rollout_timeout,
            model_retries=self.model_retries,
        )
        transcript, example_args = _prepare_example(request.example.payload)
        stopwatch = _Stopwatch() if observing() else None
        async with self.rollout_context(request.rollout_id, request.example):
            rollout = await self._run_in_context(
                request, settings, transcript, example_args, stopwatch
            )
        if stopwatch is not None:
            report_rollout(
                RolloutReport(
                    rollout_id=rollout.rollout_id,
                    termination_reason=rollout.termination_reason,
                    messages=rollout.messages,
                    model_seconds=stopwatch.model,
                    tool_seconds=stopwatch.tool,
                    reward_seconds=stopwatch.reward,
                )
            )
        return rollout

    async def _run_in_context(
        self,
        request: RolloutRequest[JsonRow],
        settings: _Settings,
        transcript: Messages,
        example_args: dict[str, Any],
        stopwatch: _Stopwatch | None,
    ) -> BaseRollout:
        from benchmax._modelhttp.chat import ChatSession

        session: ChatSession | None = None
        try:
            deadline = asyncio.timeout(settings.rollout_timeout)
            try:
                async with deadline:
                    tools = await self.list_tools()
                    session = ChatSession(
                        self._model_pool().hold(),
                        base_url=request.base_url,
                        auth=request.model_auth,
                        context=ModelRequestContext(
                            base_url=request.base_url,
                            model=request.model,
                            rollout_id=request.rollout_id,
                        ),
                        timeout=settings.model_timeout,
                        retries=settings.model_retries,
                    )
                    reason = await self._chat_loop(
                        request, settings, tools, transcript, session, stopwatch
                    )
            except TimeoutError as error:
                if not deadline.expired():
                    raise
                logger.error(
                    "base.rollout.timed_out rollout_id=%s termination_reason=rollout_timeout: "
                    "rollout exceeded rollout_timeout of %gs",
                    request.rollout_id,
                    settings.rollout_timeout,
                    exc_info=error,
                )
                reason = "rollout_timeout"
            return await self._score(request, reason, transcript, example_args, stopwatch)
        finally:
            if session is not None:
                await session.aclose()

    async def _chat_loop(
        self,
        request: RolloutRequest[JsonRow],
        settings: _Settings,
        tools: list[Tool],
        transcript: Messages,
        session: ChatSession,
        stopwatch: _Stopwatch | None,
    ) -> str:
        from benchmax._modelhttp.chat import CallFailure

        rollout_id = request.rollout_id
        advertised = advertised_tool_names(tools)
        tool_calls_used = 0
        for _ in range(settings.max_turns):
            body = _request_body(request, transcript, tools)
            with _timed(stopwatch, "model"):
                reply = await session.complete(body)
            if isinstance(reply, CallFailure):
                logger.log(
                    reply.level,
                    "base.rollout.model_failed rollout_id=%s termination_reason=%s",
                    rollout_id,
                    reply.termination_reason,
                    exc_info=reply.error,
                )
                return reply.termination_reason
            choice = _first_choice(reply)
            if choice is None:
                logger.error(
                    "base.rollout.model_failed rollout_id=%s termination_reason=model_error: "
                    "response contained no choices",
                    rollout_id,
                )
                return "model_error"
            message = choice["message"]
            calls = function_tool_calls(message)
            transcript.append(assistant_message(message, calls))
            if not calls:
                return _finish_reason_outcome(choice.get("finish_reason"))
            if (
                settings.max_tool_calls is not None
                and tool_calls_used + len(calls) > settings.max_tool_calls
            ):
                return "tool_budget_exceeded"
            tool_calls_used += len(calls)
            try:
                tool_messages = await self._run_tool_calls(
                    rollout_id, calls, advertised, settings.tool_timeout, stopwatch
                )
            except ToolTimedOut as timeout:
                logger.error(
                    "base.rollout.tool_failed rollout_id=%s termination_reason=tool_timeout: %s",
                    rollout_id,
                    timeout,
                    exc_info=timeout,
                )
                return "tool_timeout"
            except RolloutFailure as failure:
                logger.error(
                    "base.rollout.tool_failed rollout_id=%s termination_reason=%s: %s",
                    rollout_id,
                    failure.termination_reason,
                    failure,
                    exc_info=failure,
                )
                return failure.termination_reason
            except Exception as error:
                logger.error(
                    "base.rollout.tool_failed rollout_id=%s termination_reason=tool_error",
                    rollout_id,
                    exc_info=error,
                )
                return "tool_error"
            transcript.extend(tool_messages)
        return "max_turns_exceeded"

    async def _run_tool_calls(
        self,
        rollout_id: str,
        calls: list[Any],
        advertised: frozenset[str],
        timeout: float | None,
        stopwatch: _Stopwatch | None,
    ) -> list[Message]:
        messages: list[Message] = []
        for call in calls:
            name = call["function"].get("name")
            if name not in advertised:
                content: Any = f"Unknown tool: {name}"
            else:
                arguments = tool_arguments(call["function"].get("arguments"))
                if isinstance(arguments, str):
                    content = arguments
                else:
                    with _timed(stopwatch, "tool"):
                        result = await self._call_tool(rollout_id, name, arguments, timeout)
                    content = tool_content(result)
            messages.append({"role": "tool", "tool_call_id": call.get("id"), "content": content})
        return messages

    async def _call_tool(
        self, rollout_id: str, name: str, arguments: dict[str, Any], timeout: float | None
    ) -> Any:
        if timeout is None:
            return await self.run_tool(rollout_id, name, **arguments)
        deadline = asyncio.timeout(timeout)
        try:
            async with deadline:
                return await self.run_tool(rollout_id, name, **arguments)
        except TimeoutError as error:
            if deadline.expired():
                raise ToolTimedOut(name, timeout) from error
            raise

    async def _score(
        self,
        request: RolloutRequest[JsonRow],
        reason: str,
        transcript: Messages,
        example_args: dict[str, Any],
        stopwatch: _Stopwatch | None,
    ) -> BaseRollout:
        def settle(termination_reason: str, rewards: RewardMap | None) -> BaseRollout:
            return BaseRollout(
                rollout_id=request.rollout_id,
                termination_reason=termination_reason,
                rewards=rewards,
                messages=transcript,
                example_args=example_args,
                split=request.split,
            )

        if reason != "finished":
            return settle(reason, dict.fromkeys(self.reward_keys, 0.0))
        try:
            with _timed(stopwatch, "reward"):
                rewards = await self.compute_reward(settle(reason, None))
        except RolloutFailure as failure:
            logger.error(
                "base.rollout.reward_failed rollout_id=%s termination_reason=%s: %s",
                request.rollout_id,
                failure.termination_reason,
                failure,
                exc_info=failure,
            )
            return settle(failure.termination_reason, dict.fromkeys(self.reward_keys, 0.0))
        except Exception as error:
            logger.error(
                "base.rollout.reward_failed rollout_id=%s termination_reason=reward_error: %s",
                request.rollout_id,
                error,
                exc_info=error,
            )
            return settle("reward_error", dict.fromkeys(self.reward_keys, 0.0))
        return settle(reason, rewards)


def _prepare_example(payload: object) -> tuple[Messages, dict[str, Any]]:
    """A new transcript of shallow prompt copies, and every other payload field."""
    if not isinstance(payload, Mapping):
        raise TypeError("BaseEnv example payload must be a JSON object")
    prompt = payload.get("prompt_messages")
    if not isinstance(prompt, list) or not prompt:
        raise ValueError("BaseEnv example payload requires a non-empty prompt_messages list")
    transcript: Messages = []
    for index, message in enumerate(prompt):
        if not isinstance(message, Mapping):
            raise TypeError(f"prompt_messages[{index}] must be a JSON object")
        if not isinstance(message.get("role"), str):
            raise TypeError(f"prompt_messages[{index}].role must be a string")
        transcript.append(dict(message))
    example_args = {key: value for key, value in payload.items() if key != "prompt_messages"}
    return transcript, example_args


def _request_body(
    request: RolloutRequest[JsonRow], transcript: Messages, tools: list[Tool]
) -> dict[str, Any]:
    """The chat-completions body of one turn: ``model``, ``messages``, and ``tools``
    only when there are any (envs.md §4.3)."""
    body: dict[str, Any] = {"model": request.model, "messages": transcript}
    if tools:
        body["tools"] = tools
    return body


def _first_choice(reply: Any) -> dict[str, Any] | None:
    """The reply's first choice when it has one with a message object (interim
    reader; reply normalization lives in ``benchmax._modelhttp.replies``)."""
    choices = reply.get("choices") if isinstance(reply, dict) else None
    if not isinstance(choices, list) or not choices:
        return None
    choice = choices[0]
    if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
        return None
    return choice


def _finish_reason_outcome(finish_reason: object) -> str:
    if finish_reason == "stop":
        return "finished"
    if finish_reason == "length":
        return "output_exceeded"
    if finish_reason is None:
        return "model_error"
    return str(finish_reason)
