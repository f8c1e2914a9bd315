"""``BaseEnv``: a reusable OpenAI-compatible chat loop with optional function tools."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    asynccontextmanager,
    contextmanager,
    nullcontext,
)
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, cast

from benchmax._cancellation import stray_cancellation_as_error
from benchmax._modelhttp import (
    TOKEN_REQUEST_FIELDS,
    CallTokens,
    Reply,
    ReplyFailure,
    TokenDeficiency,
    ToolCall,
    add_usage,
    finish_reason_table,
    read_call_tokens,
    read_reply,
)
from benchmax._vocabulary import TokenUsage
from benchmax.auth import ModelRequestContext
from benchmax.envs._hook_deadlines import HookDeadline, deadline_for
from benchmax.envs._hook_errors import exits_as_errors, hook_errors
from benchmax.envs._observer import observing, report_rollout
from benchmax.envs._sampling_args import validated_sampling_args
from benchmax.envs.base._limits import LIMIT_NAMES, Limits
from benchmax.envs.base._sent_messages import messages_as_sent
from benchmax.envs.base._tool_calls import (
    ArgumentChecks,
    ToolTimedOut,
    advertised_tool_names,
    call_problem,
    reserved_argument_message,
    tool_content,
)
from benchmax.envs.base.dataset import JsonRow
from benchmax.envs.base.openai_types import Messages, Tool
from benchmax.envs.dataset import Dataset
from benchmax.envs.environment import Environment
from benchmax.envs.shared_types import (
    FINISHED,
    MAX_TURNS_EXCEEDED,
    MODEL_ERROR,
    REWARD_ERROR,
    REWARD_TIMEOUT,
    ROLLOUT_TIMEOUT,
    SETUP_ERROR,
    SIMULATED_USER_ERROR,
    TOOL_BUDGET_EXCEEDED,
    TOOL_ERROR,
    TOOL_TIMEOUT,
    DatasetSplit,
    Example,
    RewardMap,
    RolloutAttempt,
    RolloutFailure,
    RolloutRequest,
)
from benchmax.tools import ToolError
from benchmax.trajectory import (
    SIMULATED_USER_KEY,
    ModelCall,
    ToolCallTiming,
    Trajectory,
    recording_annotations,
)

if TYPE_CHECKING:  # imported on first use: aiohttp costs a quarter second to import
    from benchmax._modelhttp import ChatSession, PoolLease

__all__ = ["BaseEnv", "BaseRollout"]

logger = logging.getLogger(__name__)

_POOL_LEASE_ATTRIBUTE = "_benchmax_model_pool_lease"
_OTHER_SETTINGS = ("send_reasoning", "sampling_args", "record_tokens")
"""The constructor's other overriding settings (``tools`` is checked apart)."""

_Transcript = list[dict[str, Any]]
"""A rollout's messages while it runs: decoded JSON objects. They become
``BaseRollout.messages`` (typed as the SDK's message params) only when it settles."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BaseRollout(RolloutAttempt):
    """A finished ``BaseEnv`` rollout: its transcript and the example's other fields."""

    messages: Messages
    example_args: Mapping[str, Any]
    split: DatasetSplit = "train"


@dataclass(frozen=True, slots=True)
class _Settings:
    """The limits and settings in effect for one rollout, read once when it starts."""

    limits: Limits
    max_turns: int  # limits.max_turns, checked to be set
    tools: HookDeadline  # limits.tool_timeout, else the runner's default
    setup: HookDeadline  # rollout_context: the runner's default only
    user_turn: HookDeadline
    send_reasoning: bool
    sampling_args: Mapping[str, Any]
    finish_reasons: Mapping[str, str]
    record_tokens: bool


class _Meter:
    """What a runner is told about a rollout: time spent waiting on the model, in tools
    and in ``compute_reward``, the token usage the model's replies reported, one
    ``ModelCall`` per model call and one ``ToolCallTiming`` per tool message."""

    __slots__ = ("calls", "model", "reward", "tool", "tool_calls", "tools_pending", "usage")

    def __init__(self) -> None:
        self.model = 0.0
        self.tool = 0.0
        self.reward = 0.0
        self.usage: dict[str, int] | None = None
        self.calls: list[ModelCall] = []
        self.tool_calls: list[ToolCallTiming] = []
        self.tools_pending: list[tuple[str, float]] = []

    def describe_call(
        self,
        reply: Reply | ReplyFailure,
        message_index: int | None,
        tokens: CallTokens | TokenDeficiency | None = None,
    ) -> None:
        """Fill in the last model call from its reply (``message_index``: where its
        assistant message went in the transcript, ``None`` when it added none) and, when
        recorded, its exact tokens."""
        finish_reason = reply.finish_reason if isinstance(reply, Reply) else None
        fields: dict[str, Any] = {
            "finish_reason": finish_reason if isinstance(finish_reason, str) else None,
            "usage": reply.usage,
            "message_index": message_index,
        }
        if isinstance(tokens, CallTokens):
            fields["prompt_token_ids"] = tokens.prompt_token_ids
            fields["completion_token_ids"] = tokens.completion_token_ids
            fields["completion_logprobs"] = tokens.completion_logprobs
        call = self.calls[-1] = replace(self.calls[-1], **fields)
        if call.has_tokens:
            # Settle once, while the ids are fresh, whether this call continues the last
            # one with tokens: the call keeps the answer, so writing the record and
            # building training samples later take time linear in this turn only.
            previous = next((c for c in reversed(self.calls[:-1]) if c.has_tokens), None)
            if previous is not None:
                call.continues(previous)

    def tools_answered(self, first_index: int) -> None:
        """The pending tool calls' messages went into the transcript from ``first_index``."""
        self.tool_calls.extend(
            ToolCallTiming(name=name, seconds=round(seconds, 6), message_index=first_index + offset)
            for offset, (name, seconds) in enumerate(self.tools_pending)
        )
        self.tools_pending.clear()

    @contextmanager
    def timing(self, part: str) -> Iterator[None]:
        """Add the time spent in the ``with`` block to ``part``."""
        started = time.perf_counter()
        try:
            yield
        finally:
            setattr(self, part, getattr(self, part) + time.perf_counter() - started)


def _timed(meter: _Meter | None, part: str) -> AbstractContextManager[None]:
    """Time ``part`` when a runner observes rollouts; nothing otherwise."""
    return nullcontext() if meter is None else meter.timing(part)


async def _call_model(session: ChatSession, body: dict[str, Any], meter: _Meter | None) -> Any:
    """``session.complete(body)``; when observed, its time joins ``model_seconds`` and a
    ``ModelCall`` is started for it (also when the call is cancelled)."""
    if meter is None:
        return await session.complete(body)
    started = time.perf_counter()
    try:
        return await session.complete(body)
    finally:
        seconds = time.perf_counter() - started
        meter.model += seconds
        meter.calls.append(ModelCall(seconds=round(seconds, 6)))


class BaseEnv(Environment[JsonRow, BaseRollout], ABC):
    """A reusable OpenAI-compatible chat loop with optional function tools.

    Example payloads are JSON objects whose reserved ``prompt_messages`` field
    opens the transcript; every other field reaches the reward hooks as
    ``example_args``. Subclasses declare ``reward_keys``, ``max_turns`` and
    ``create_dataset``, and usually ``compute_reward``; tools come from
    ``tools`` (``@tool`` functions, ``Toolset``s and tool providers such as
    ``MCPServer``, opened per rollout; see ``benchmax.tools``), or from
    hand-written ``list_tools`` and ``run_tool``.

    Beyond the 0.2 limits, ``model_timeout``, ``tool_timeout``,
    ``rollout_timeout`` and ``reward_timeout`` (seconds, or ``None`` for none)
    end a rollout with the reason of the same name, and ``model_retries``
    retries transient model failures (connection errors, timeouts, HTTP
    408/409/429/5xx) with backoff.

    Requests and replies (``beyond.md`` §7-8): ``sampling_args`` are extra body
    fields (``temperature``, ``max_tokens``, ...) sent after ``model``,
    ``messages`` and ``tools``; a request's own ``sampling_args`` win over them.
    ``finish_reasons`` extends or overrides the table mapping a reply's
    ``finish_reason`` to a termination reason (``{"eos": "finished", ...}``,
    case-insensitive). A reply's ``reasoning_content``/``reasoning`` fields are
    kept in the transcript (``BaseRollout.messages``, seen by the reward hooks
    and recorded by the runner) but sent back to the model only when
    ``send_reasoning`` is true.

    Exact tokens (issue 17): with ``record_tokens`` true (or a request's
    ``record_tokens``), every model call asks the server for its prompt token ids,
    completion token ids and logprobs (``logprobs`` and ``return_token_ids`` body
    fields, before ``sampling_args``, which may add to them) and records them per
    call; a reply without them ends the rollout with ``model_error`` naming what
    it lacked, so no rollout is recorded with tokens silently missing.

    Simulated users (issue 20): ``user_turn`` may answer an assistant turn that has no
    tool calls with the next user message (``benchmax.tools.SimulatedUser`` plays a user
    from a model endpoint); by default it ends the rollout, as before.
    """

    max_turns: int | None = None
    max_tool_calls: int | None = None
    model_timeout: float | None = None
    tool_timeout: float | None = None
    rollout_timeout: float | None = None
    model_retries: int = 0
    reward_timeout: float | None = None
    send_reasoning: bool = False
    sampling_args: Mapping[str, Any] = MappingProxyType({})
    finish_reasons: Mapping[str, str] = MappingProxyType({})
    record_tokens: bool = False
    tools: Sequence[Any] = ()

    def __init__(
        self,
        *,
        max_turns: int | None = None,
        max_tool_calls: int | None = None,
        model_timeout: float | None = None,
        tool_timeout: float | None = None,
        rollout_timeout: float | None = None,
        model_retries: int | None = None,
        reward_timeout: float | None = None,
        send_reasoning: bool | None = None,
        sampling_args: Mapping[str, Any] | None = None,
        record_tokens: bool | None = None,
        tools: Sequence[Any] | None = None,
    ) -> None:
        """Override class-level settings; a ``None`` argument keeps the class value.

        ``tools`` lists ``@tool`` functions (a plain typed function is made one),
        ``Toolset`` instances and tool providers (``MCPServer``).

        Raises ``ValueError`` (``TypeError`` for a wrongly typed ``send_reasoning``,
        ``record_tokens``, ``sampling_args``, ``finish_reasons`` or ``tools`` entry) naming
        the setting that is invalid.
        """
        arguments = dict(locals())  # the keyword arguments, by name
        super().__init__()
        if sampling_args is not None:  # a copy: later changes to the caller's dict don't leak
            arguments["sampling_args"] = validated_sampling_args(sampling_args)
        for name in (*LIMIT_NAMES, *_OTHER_SETTINGS):
            if arguments[name] is not None:
                setattr(self, name, arguments[name])
        if tools is not None:
            from benchmax.envs.base._tool_table import checked_entries

            self.tools = checked_entries(tools)
        self._validate_limits()

    def _validate_limits(self) -> tuple[Limits, dict[str, Any], Mapping[str, str]]:
        """Check every setting; return the limits, the sampling args and the finish_reason
        table."""
        limits = Limits.of(self)
        if not isinstance(self.send_reasoning, bool):
            raise TypeError("send_reasoning must be True or False")
        if not isinstance(self.record_tokens, bool):
            raise TypeError("record_tokens must be True or False")
        sampling_args = validated_sampling_args(self.sampling_args)
        return limits, sampling_args, finish_reason_table(self.finish_reasons)

    @abstractmethod
    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> Dataset[JsonRow]:
        """Return the split's examples; payloads must contain ``prompt_messages``."""

    async def list_tools(self) -> list[Tool]:
        """Tools advertised to the model (OpenAI function-tool dicts): those of ``tools``
        (outside a rollout, providers' sessions are opened and closed to list them)."""
        if not _declares_tools(self.tools):
            return []
        from benchmax.envs.base._tool_table import listed_tools

        return cast(list[Tool], await listed_tools(self))

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        """Run one advertised tool with the model's keyword arguments (by default, one
        of ``tools``, inside its rollout); ``ValueError("Unknown tool: ...")`` otherwise.

        An override may name its parameters (``run_tool(self, rollout_id, tool_name,
        city)``): arguments that do not bind to them are answered with a tool message and
        it is not called. A ``TypeError`` it raises saying ``unexpected keyword argument
        'x'``, for an ``x`` the model passed that the advertised schema does not declare,
        is answered the same way (the model's mistake); any other exception, a
        ``TypeError`` naming a declared argument included, is a bug (``tool_error``)."""
        if not _declares_tools(self.tools):
            raise ValueError(f"Unknown tool: {tool_name}")
        from benchmax.envs.base._tool_table import run_declared_tool

        return await run_declared_tool(rollout_id, tool_name, tool_args)

    async def user_turn(
        self,
        rollout_id: str,
        messages: Sequence[Mapping[str, Any]],
        example: Example[JsonRow],
    ) -> str | None:
        """The user's next message after an assistant turn without tool calls, or ``None``
        to end the rollout (the default: the assistant's reply ends it, as in 0.2).

        ``messages`` is the transcript so far (a copy; its last message is that assistant
        reply; earlier simulated-user messages carry ``SIMULATED_USER_KEY``); ``example``
        is the rollout's example (its payload holds e.g. a persona and a goal). A returned
        string joins the transcript as ``{"role": "user", "content": ..., "simulated_user":
        true}`` (the marker key is not sent to the model) and the loop calls the model
        again; every model call counts against ``max_turns``, so a user who still has
        something to say when no turn is left ends the rollout as ``max_turns_exceeded``.
        Only replies that finished normally (termination reason ``finished``) are offered.

        A ``RolloutFailure`` settles the rollout with its reason; any other exception,
        or an empty message, settles it as ``simulated_user_error``; a result that is
        neither a string nor ``None`` is a contract error (``TypeError``).
        """
        return None

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

    def _hook(self, name: str) -> str:
        return f"{type(self).__name__}.{name}"

    def _model_pool(self) -> PoolLease:
        # Created lazily: subclasses may skip __init__, and instances are pickled.
        state = vars(self)
        lease: PoolLease | None = state.get(_POOL_LEASE_ATTRIBUTE)
        if lease is None:
            from benchmax._modelhttp import PoolLease

            lease = state.setdefault(_POOL_LEASE_ATTRIBUTE, PoolLease())
        return lease

    async def run_rollout(self, request: RolloutRequest[JsonRow]) -> BaseRollout:
        """Run the chat/tool loop for one request, then score it."""
        limits, sampling_args, finish_reasons = self._validate_limits()
        if limits.max_turns is None:
            raise ValueError(f"{type(self).__name__} must configure max_turns before rollout")
        settings = _Settings(
            limits=limits,
            max_turns=limits.max_turns,
            tools=deadline_for("tools", limits.tool_timeout),
            setup=deadline_for("rollout_context"),
            user_turn=deadline_for("user_turn"),
            send_reasoning=self.send_reasoning,
            sampling_args=sampling_args,
            finish_reasons=finish_reasons,
            record_tokens=self.record_tokens or request.record_tokens,
        )
        transcript, example_args = _prepare_example(request.example.payload)
        meter = _Meter() if observing() else None
        recording: AbstractContextManager[dict[str, Any]] = (
            nullcontext({}) if meter is None else recording_annotations()
        )
        with recording as annotations:
            with hook_errors(self, "rollout_context"):
                context = self.rollout_context(request.rollout_id, request.example)
            if await _entered(self, context, request.rollout_id, settings.setup):
                async with (
                    _leaving(self, context, request.rollout_id, settings.setup),
                    _declared_tools(self, request, settings) as failed,
                ):
                    if failed is None:
                        rollout = await self._run_in_context(
                            request, settings, transcript, example_args, meter
                        )
                    else:  # a declared tool (toolset, provider session) did not open
                        rollout = await self._score(
                            request,
                            settings.limits.reward_timeout,
                            failed,
                            transcript,
                            example_args,
                            meter,
                        )
            else:  # setup failed: no model call, no reward hooks
                rollout = BaseRollout(
                    rollout_id=request.rollout_id,
                    termination_reason=SETUP_ERROR,
                    rewards=dict.fromkeys(self.reward_keys, 0.0),
                    messages=cast(Messages, transcript),
                    example_args=example_args,
                    split=request.split,
                )
        if meter is not None:
            report_rollout(
                Trajectory(
                    rollout_id=rollout.rollout_id,
                    example_id=request.example.id,
                    termination_reason=rollout.termination_reason,
                    rewards=rollout.rewards or {},
                    split=request.split,
                    messages=tuple(cast(list[dict[str, Any]], rollout.messages)),
                    model_calls=tuple(meter.calls),
                    tool_calls=tuple(meter.tool_calls),
                    timings={
                        "model_seconds": round(meter.model, 6),
                        "tool_seconds": round(meter.tool, 6),
                        "reward_seconds": round(meter.reward, 6),
                    },
                    usage=cast(TokenUsage | None, meter.usage),
                    annotations=annotations,
                )
            )
        return rollout

    async def _run_in_context(
        self,
        request: RolloutRequest[JsonRow],
        settings: _Settings,
        transcript: _Transcript,
        example_args: dict[str, Any],
        meter: _Meter | None,
    ) -> BaseRollout:
        from benchmax._modelhttp import ChatSession

        session: ChatSession | None = None
        try:
            deadline = asyncio.timeout(settings.limits.rollout_timeout)
            try:
                async with deadline:
                    tools = await self._listed_tools(request.rollout_id)
                    if isinstance(tools, str):  # the reason listing failed with
                        return await self._score(
                            request,
                            settings.limits.reward_timeout,
                            tools,
                            transcript,
                            example_args,
                            meter,
                        )
                    session = ChatSession(
                        self._model_pool().hold(),
                        base_url=request.base_url,
                        auth=request.model_auth,
                        context=ModelRequestContext(
                            base_url=request.base_url,
                            model=request.model,
                            rollout_id=request.rollout_id,
                        ),
                        timeout=settings.limits.model_timeout,
                        retries=settings.limits.model_retries,
                    )
                    reason = await self._chat_loop(
                        request, settings, tools, transcript, session, meter
                    )
            except TimeoutError as error:
                if not deadline.expired():
                    raise
                logger.error(
                    "base.rollout.timed_out rollout_id=%s termination_reason=rollout_timeout: "
                    "rollout exceeded rollout_timeout of %gs",
                    request.rollout_id,
                    settings.limits.rollout_timeout,
                    exc_info=error,
                )
                reason = ROLLOUT_TIMEOUT
            return await self._score(
                request, settings.limits.reward_timeout, reason, transcript, example_args, meter
            )
        finally:
            if session is not None:
                await session.aclose()

    async def _listed_tools(self, rollout_id: str) -> list[Tool] | str:
        """``list_tools()``, or ``tool_timeout`` (logged) when it outlived the runner's
        default deadline for tools (the environment's own limits do not bound it)."""
        listing = deadline_for("tools")
        timer = asyncio.timeout(listing.seconds)
        try:
            async with timer:
                with hook_errors(self, "list_tools"):
                    return await self.list_tools()
        except TimeoutError as error:
            if not timer.expired():
                raise
            logger.error(
                "base.rollout.tool_failed rollout_id=%s termination_reason=tool_timeout: %s",
                rollout_id,
                listing.expired_message("list_tools", error, type(self).list_tools),
            )
            return TOOL_TIMEOUT

    async def _chat_loop(
        self,
        request: RolloutRequest[JsonRow],
        settings: _Settings,
        tools: list[Tool],
        transcript: _Transcript,
        session: ChatSession,
        meter: _Meter | None,
    ) -> str:
        from benchmax._modelhttp import CallFailure

        rollout_id = request.rollout_id
        advertised = advertised_tool_names(tools)
        checks = ArgumentChecks(tools)
        tool_calls_used = 0
        call_ids: set[str] = set()
        # What the model is sent: the transcript without reasoning fields, unless
        # send_reasoning (then the transcript itself).
        sent = transcript if settings.send_reasoning else list(transcript)
        for _ in range(settings.max_turns):
            body: dict[str, Any] = {"model": request.model, "messages": messages_as_sent(sent)}
            if tools:
                body["tools"] = tools
            if settings.record_tokens:
                body.update(TOKEN_REQUEST_FIELDS)
            body.update(settings.sampling_args)
            body.update(request.sampling_args)
            decoded = await _call_model(session, body, meter)
            if isinstance(decoded, CallFailure):
                logger.log(
                    decoded.level,
                    "base.rollout.model_failed rollout_id=%s termination_reason=%s",
                    rollout_id,
                    decoded.termination_reason,
                    exc_info=decoded.error,
                )
                return decoded.termination_reason
            reply = read_reply(decoded, taken_ids=call_ids, finish_reasons=settings.finish_reasons)
            tokens = (
                read_call_tokens(decoded)
                if settings.record_tokens and not isinstance(reply, ReplyFailure)
                else None
            )
            if meter is not None:
                meter.usage = add_usage(meter.usage, reply.usage)
                kept = isinstance(reply, Reply) and not isinstance(tokens, TokenDeficiency)
                meter.describe_call(reply, len(transcript) if kept else None, tokens)
            if isinstance(reply, ReplyFailure):
                logger.error(
                    "base.rollout.model_failed rollout_id=%s termination_reason=%s: %s",
                    rollout_id,
                    reply.termination_reason,
                    reply.message,
                )
                return reply.termination_reason
            if isinstance(tokens, TokenDeficiency):
                logger.error(
                    "base.rollout.model_failed rollout_id=%s termination_reason=%s:"
                    " record_tokens is on but %s",
                    rollout_id,
                    MODEL_ERROR,
                    tokens.message,
                )
                return MODEL_ERROR
            transcript.append(reply.message)
            if sent is not transcript:
                sent.append(
                    reply.message if settings.send_reasoning else reply.message_without_reasoning
                )
            calls = reply.tool_calls
            if reply.termination_reason is not None:  # no calls, or cut while writing them
                if reply.finish_note is not None:
                    logger.warning(
                        "base.rollout.finish_reason rollout_id=%s termination_reason=%s: %s",
                        rollout_id,
                        reply.termination_reason,
                        reply.finish_note,
                    )
                if reply.termination_reason != FINISHED:
                    return reply.termination_reason
                answer = await self._user_answer(request, transcript, settings.user_turn)
                if answer is None:
                    return FINISHED
                if not isinstance(answer, dict):  # the reason the user turn failed with
                    return answer
                if sent is transcript:  # send_reasoning: from now on, a copy without markers
                    sent = list(transcript)
                transcript.append(answer)
                sent.append({"role": "user", "content": answer["content"]})
                continue
            call_ids.update(call.id for call in calls)
            if (
                settings.limits.max_tool_calls is not None
                and tool_calls_used + len(calls) > settings.limits.max_tool_calls
            ):
                return TOOL_BUDGET_EXCEEDED
            tool_calls_used += len(calls)
            try:
                tool_messages = await self._run_tool_calls(
                    rollout_id, calls, advertised, checks, settings.tools, meter
                )
            except ToolTimedOut as timeout:
                logger.error(
                    "base.rollout.tool_failed rollout_id=%s termination_reason=tool_timeout: %s",
                    rollout_id,
                    timeout,
                    exc_info=timeout,
                )
                return TOOL_TIMEOUT
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
                return TOOL_ERROR
            if meter is not None:
                meter.tools_answered(len(transcript))
            transcript.extend(tool_messages)
            if sent is not transcript:
                sent.extend(tool_messages)
        return MAX_TURNS_EXCEEDED

    async def _user_answer(
        self, request: RolloutRequest[JsonRow], transcript: _Transcript, deadline: HookDeadline
    ) -> dict[str, Any] | str | None:
        """Ask ``user_turn`` for the next message: the marked user message, ``None`` (the
        rollout ends) or the termination reason it failed with (logged)."""
        rollout_id = request.rollout_id
        timer = asyncio.timeout(deadline.seconds)
        try:
            with (
                hook_errors(self, "user_turn"),
                stray_cancellation_as_error(self._hook("user_turn")),
            ):
                async with timer:
                    answer: object = await self.user_turn(
                        rollout_id, [dict(message) for message in transcript], request.example
                    )
        except RolloutFailure as failure:
            logger.error(
                "base.rollout.user_failed rollout_id=%s termination_reason=%s: %s",
                rollout_id,
                failure.termination_reason,
                failure,
                exc_info=failure,
            )
            return failure.termination_reason
        except Exception as error:
            if isinstance(error, TimeoutError) and timer.expired():
                logger.error(
                    "base.rollout.user_failed rollout_id=%s termination_reason=%s: %s",
                    rollout_id,
                    SIMULATED_USER_ERROR,
                    deadline.expired_message("user_turn", error, type(self).user_turn),
                )
                return SIMULATED_USER_ERROR
            logger.error(
                "base.rollout.user_failed rollout_id=%s termination_reason=%s: %s",
                rollout_id,
                SIMULATED_USER_ERROR,
                error,
                exc_info=error,
            )
            return SIMULATED_USER_ERROR
        if answer is None:
            return None
        if not isinstance(answer, str):
            with hook_errors(self, "user_turn"):
                raise TypeError(
                    f"user_turn must return a string or None, not {type(answer).__name__}"
                )
        if not answer.strip():
            logger.error(
                "base.rollout.user_failed rollout_id=%s termination_reason=%s: "
                "user_turn returned an empty message",
                rollout_id,
                SIMULATED_USER_ERROR,
            )
            return SIMULATED_USER_ERROR
        return {"role": "user", "content": answer, SIMULATED_USER_KEY: True}

    async def _run_tool_calls(
        self,
        rollout_id: str,
        calls: Sequence[ToolCall],
        advertised: frozenset[str],
        checks: ArgumentChecks,
        timeout: HookDeadline,
        meter: _Meter | None,
    ) -> _Transcript:
        messages: _Transcript = []
        for call in calls:
            name = call.name
            arguments = call.arguments
            spent_before = 0.0 if meter is None else meter.tool
            if name not in advertised:
                content: Any = f"Unknown tool: {name}"
            elif isinstance(arguments, str):
                content = arguments
            elif (reserved := reserved_argument_message(arguments)) is not None:
                content = reserved
            elif (invalid := checks.problem(name, arguments)) is not None:
                content = invalid
            elif (refused := call_problem(self.run_tool, rollout_id, arguments)) is not None:
                content = refused
            else:
                try:
                    with (
                        _timed(meter, "tool"),
                        stray_cancellation_as_error(self._hook("run_tool")),
                    ):
                        result = await self._call_tool(rollout_id, name, arguments, timeout)
                except ToolError as error:  # meant for the model: the rollout goes on
                    content = str(error)
                except TypeError as error:  # an argument the tool does not take, or a bug
                    if (refused := checks.refused_argument(name, arguments, error)) is None:
                        raise
                    content = refused
                else:
                    content = tool_content(result)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
            if meter is not None:
                meter.tools_pending.append((name, meter.tool - spent_before))
        return messages

    async def _call_tool(
        self, rollout_id: str, name: str, arguments: dict[str, Any], timeout: HookDeadline
    ) -> Any:
        if timeout.seconds is None:
            return await self.run_tool(rollout_id, name, **arguments)
        deadline = asyncio.timeout(timeout.seconds)
        try:
            async with deadline:
                return await self.run_tool(rollout_id, name, **arguments)
        except TimeoutError as error:
            if not deadline.expired():
                raise
            if timeout.default:
                message = timeout.expired_message(
                    f"tool {name!r}", error, type(self).run_tool, "tool_timeout"
                )
                raise ToolTimedOut(name, timeout.seconds, message=message) from error
            raise ToolTimedOut(name, timeout.seconds) from error

    async def _score(
        self,
        request: RolloutRequest[JsonRow],
        reward_timeout: float | None,
        reason: str,
        transcript: _Transcript,
        example_args: dict[str, Any],
        meter: _Meter | None,
    ) -> BaseRollout:
        rollout_id = request.rollout_id

        def settle(termination_reason: str, rewards: RewardMap | None) -> BaseRollout:
            return BaseRollout(
                rollout_id=rollout_id,
                termination_reason=termination_reason,
                rewards=rewards,
                # The transcript holds prompt messages, decoded replies and tool
                # messages: plain dicts shaped as the SDK's message params.
                messages=cast(Messages, transcript),
                example_args=example_args,
                split=request.split,
            )

        def zero(termination_reason: str) -> BaseRollout:
            return settle(termination_reason, dict.fromkeys(self.reward_keys, 0.0))

        if reason != FINISHED:
            return zero(reason)
        limit = deadline_for("compute_reward", reward_timeout)
        deadline = asyncio.timeout(limit.seconds)
        try:
            with _timed(meter, "reward"):
                async with deadline:
                    with (
                        exits_as_errors(self, "compute_reward"),
                        stray_cancellation_as_error(self._hook("compute_reward")),
                    ):
                        rewards = await self.compute_reward(settle(reason, None))
        except RolloutFailure as failure:
            logger.error(
                "base.rollout.reward_failed rollout_id=%s termination_reason=%s: %s",
                rollout_id,
                failure.termination_reason,
                failure,
                exc_info=failure,
            )
            return zero(failure.termination_reason)
        except Exception as error:
            if isinstance(error, TimeoutError) and deadline.expired():
                if limit.default:
                    logger.error(
                        "base.rollout.reward_failed rollout_id=%s termination_reason=%s: %s",
                        rollout_id,
                        REWARD_TIMEOUT,
                        limit.expired_message(
                            "compute_reward", error, type(self).compute_reward, "reward_timeout"
                        ),
                    )
                    return zero(REWARD_TIMEOUT)
                logger.error(
                    "base.rollout.reward_failed rollout_id=%s termination_reason=reward_timeout: "
                    "compute_reward exceeded reward_timeout of %gs",
                    rollout_id,
                    reward_timeout,
                    exc_info=error,
                )
                return zero(REWARD_TIMEOUT)
            logger.error(
                "base.rollout.reward_failed rollout_id=%s termination_reason=reward_error: %s",
                rollout_id,
                error,
                exc_info=error,
            )
            return zero(REWARD_ERROR)
        non_finite = _non_finite_reward(rewards, self.reward_keys)
        if non_finite is not None:
            logger.error(
                "base.rollout.reward_failed rollout_id=%s termination_reason=reward_error: "
                "compute_reward returned a non-finite value for reward %r: %r",
                rollout_id,
                *non_finite,
            )
            return zero(REWARD_ERROR)
        with hook_errors(self, "compute_reward"):
            return settle(reason, rewards)


async def _entered(
    env: BaseEnv,
    context: AbstractAsyncContextManager[object],
    rollout_id: str,
    deadline: HookDeadline,
) -> bool:
    """Enter ``rollout_context``; ``False`` (logged) when its setup raised.

    A context that cannot be entered at all (no ``__aenter__``) is a contract error naming
    the hook; a ``RolloutFailure`` keeps its own reason (it propagates); any other
    exception, or a stray ``CancelledError``, is a setup failure (``setup_error``).
    """
    with hook_errors(env, "rollout_context"):
        enter = context.__aenter__
    timer = asyncio.timeout(deadline.seconds)
    try:
        with (
            exits_as_errors(env, "rollout_context"),
            stray_cancellation_as_error(env._hook("rollout_context")),
        ):
            async with timer:
                await enter()
    except RolloutFailure:
        raise
    except Exception as error:
        if isinstance(error, TimeoutError) and timer.expired():
            logger.error(
                "base.rollout.setup_failed rollout_id=%s termination_reason=setup_error: %s",
                rollout_id,
                deadline.expired_message(
                    "rollout_context (entering)", error, type(env).rollout_context
                ),
            )
            return False
        logger.error(
            "base.rollout.setup_failed rollout_id=%s termination_reason=setup_error: "
            "rollout_context could not be entered: %s",
            rollout_id,
            error,
            exc_info=error,
        )
        return False
    return True


@asynccontextmanager
async def _leaving(
    env: BaseEnv,
    context: AbstractAsyncContextManager[object],
    rollout_id: str,
    deadline: HookDeadline,
) -> AsyncIterator[None]:
    """Exit an entered ``rollout_context`` like ``async with`` (it sees the body's error),
    but an exception raised while exiting is logged, never raised over the outcome or
    the body's own error; the body's error is never suppressed."""
    try:
        yield
    except BaseException as error:
        await _exit_logged(env, context, rollout_id, error, deadline)
        raise
    else:
        await _exit_logged(env, context, rollout_id, None, deadline)


async def _exit_logged(
    env: BaseEnv,
    context: AbstractAsyncContextManager[object],
    rollout_id: str,
    error: BaseException | None,
    deadline: HookDeadline,
) -> None:
    timer = asyncio.timeout(deadline.seconds)
    try:
        with stray_cancellation_as_error(env._hook("rollout_context")):
            async with timer:
                if error is None:
                    await context.__aexit__(None, None, None)
                else:
                    await context.__aexit__(type(error), error, error.__traceback__)
    except Exception as exit_error:
        if exit_error is error:
            return
        if isinstance(exit_error, TimeoutError) and timer.expired():
            logger.error(
                "base.rollout.teardown_failed rollout_id=%s: %s",
                rollout_id,
                deadline.expired_message(
                    "rollout_context (leaving)", exit_error, type(env).rollout_context
                ),
            )
            return
        logger.error(
            "base.rollout.teardown_failed rollout_id=%s: rollout_context raised on exit: %s",
            rollout_id,
            exit_error,
            exc_info=exit_error,
        )


@asynccontextmanager
async def _declared_tools(
    env: BaseEnv, request: RolloutRequest[JsonRow], settings: _Settings
) -> AsyncIterator[str | None]:
    """Open ``env.tools`` for the rollout (inside its ``rollout_context``) and close them
    when it ends; yields ``None``, or the termination reason when they did not open."""
    if not _declares_tools(env.tools):
        yield None
        return
    from benchmax.envs.base._tool_table import open_declared_tools

    declared, failed = await open_declared_tools(env, request, settings.tools.seconds)
    try:
        yield failed
    finally:
        if declared is not None:
            await declared.aclose(settings.tools.seconds)


def _declares_tools(tools: object) -> bool:
    """Whether ``tools`` declares tools for the default ``list_tools``/``run_tool``: a
    list or tuple holding something other than dicts and strings (a hand-written
    environment's own tool specs, which its own ``list_tools`` serves, are left alone)."""
    return isinstance(tools, list | tuple) and any(not isinstance(t, Mapping | str) for t in tools)


def _non_finite_reward(rewards: object, declared: Sequence[str]) -> tuple[str, float] | None:
    """The first non-finite value of a reward map that is otherwise valid for ``declared``
    keys (other defects stay contract errors), or ``None``."""
    if not isinstance(rewards, Mapping) or not rewards:
        return None
    keys = set(declared)
    found: tuple[str, float] | None = None
    for key, value in rewards.items():
        if key not in keys or isinstance(value, bool) or not isinstance(value, int | float):
            return None
        if found is None and isinstance(value, float) and not math.isfinite(value):
            found = (key, value)
    return found


def _prepare_example(payload: object) -> tuple[_Transcript, dict[str, Any]]:
    """A new transcript of shallow prompt copies, and every other payload field."""
    if not isinstance(payload, Mapping):
        raise TypeError("BaseEnv example payload must be a JSON object")
    prompt = payload.get("prompt_messages")
    if not isinstance(prompt, list) or not prompt:
        raise ValueError("BaseEnv example payload requires a non-empty prompt_messages list")
    transcript: _Transcript = []
    for index, message in enumerate(prompt):
        if not isinstance(message, Mapping):
            raise TypeError(f"prompt_messages[{index}] must be a JSON object")
        if not isinstance(message.get("role"), str):
            raise TypeError(f"prompt_messages[{index}].role must be a string")
        transcript.append(dict(message))
    example_args = {key: value for key, value in payload.items() if key != "prompt_messages"}
    return transcript, example_args
