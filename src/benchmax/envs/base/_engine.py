"""One ``BaseEnv`` rollout, run by the engine that owns its state: ``RolloutEngine``.

``BaseEnv.run_rollout`` reads its settings once and makes an engine per rollout with what
it needs passed in: the environment's public hooks (``RolloutHooks``), the request, the
``Settings``, the model connection pool and the kind of rollout to settle as. The engine
holds the rollout's transcript, meter and turn counters; it enters ``rollout_context``,
opens the declared tools, lists the tools, opens a chat session and runs the turn loop
(model call, reply, tool calls or a simulated user's answer) within ``rollout_timeout``,
scores the rollout and reports it to an observing runner. It calls only the hooks a
subclass may override, never the environment's own machinery.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, cast

from benchmax._cancellation import stray_cancellation_as_error
from benchmax._modelhttp import (
    TOKEN_REQUEST_FIELDS,
    Reply,
    ReplyFailure,
    TokenDeficiency,
    add_usage,
    read_call_tokens,
    read_reply,
    reply_weights_version,
)
from benchmax._observer import observing
from benchmax.auth import ModelRequestContext
from benchmax.envs._hook_errors import hook_errors
from benchmax.envs.base._meter import Meter, call_model
from benchmax.envs.base._rollout_context import entered, leaving
from benchmax.envs.base._rollout_hooks import RolloutFactory, RolloutHooks, hook_name
from benchmax.envs.base._rollout_start import Settings, Transcript, prepare_example
from benchmax.envs.base._scoring import score_rollout
from benchmax.envs.base._sent_messages import messages_as_sent
from benchmax.envs.base._tool_calls import ArgumentChecks, ToolTimedOut, advertised_tool_names
from benchmax.envs.base._tool_turns import declared_tools, listed_tools, run_tool_calls
from benchmax.envs.base.dataset import JsonRow
from benchmax.envs.base.openai_types import Messages, Tool
from benchmax.envs.shared_types import (
    FINISHED,
    MAX_TURNS_EXCEEDED,
    MODEL_ERROR,
    ROLLOUT_TIMEOUT,
    SETUP_ERROR,
    SIMULATED_USER_ERROR,
    TOOL_BUDGET_EXCEEDED,
    TOOL_ERROR,
    TOOL_TIMEOUT,
    RolloutAttempt,
    RolloutFailure,
    RolloutRequest,
)
from benchmax.trajectory import SIMULATED_USER_KEY, recording_annotations

if TYPE_CHECKING:  # imported on first use: aiohttp costs a quarter second to import
    from benchmax._modelhttp import ChatSession, PoolLease

__all__ = ["RolloutEngine"]

logger = logging.getLogger("benchmax.envs.base.env")


class RolloutEngine[R: RolloutAttempt]:
    """Runs one rollout of ``env`` for ``request`` under ``settings`` and owns its state.

    ``model_pool`` gives the environment's connection pool (called once a chat session
    opens); ``rollout_type`` makes the finished rollout (``BaseRollout``). The example
    payload is checked when the engine is made (``TypeError``/``ValueError``).
    """

    __slots__ = (
        "_call_ids",
        "_env",
        "_example_args",
        "_meter",
        "_model_pool",
        "_request",
        "_rollout_type",
        "_settings",
        "_tool_calls_used",
        "_transcript",
    )

    def __init__(
        self,
        env: RolloutHooks[R],
        request: RolloutRequest[JsonRow],
        settings: Settings,
        *,
        model_pool: Callable[[], PoolLease],
        rollout_type: RolloutFactory[R],
    ) -> None:
        self._env = env
        self._request = request
        self._settings = settings
        self._model_pool = model_pool
        self._rollout_type = rollout_type
        self._transcript: Transcript
        self._transcript, self._example_args = prepare_example(request.example.payload)
        self._meter = Meter() if observing() else None
        self._tool_calls_used = 0
        self._call_ids: set[str] = set()

    async def run(self) -> R:
        """Run the rollout inside its ``rollout_context`` and settle it; when a runner
        observes rollouts, report its record."""
        env, request, settings = self._env, self._request, self._settings
        meter = self._meter
        recording: AbstractContextManager[dict[str, Any]] = (
            nullcontext({}) if meter is None else recording_annotations()
        )
        with recording as annotations:
            with hook_errors(env, "rollout_context"):
                context = env.rollout_context(request.rollout_id, request.example)
            if await entered(env, context, request.rollout_id, settings.setup):
                async with (
                    leaving(env, context, request.rollout_id, settings.setup),
                    declared_tools(env, request, settings) as failed,
                ):
                    if failed is None:
                        rollout = await self._run_in_context()
                    else:  # a declared tool (toolset, provider session) did not open
                        rollout = await self._score(failed)
            else:  # setup failed: no model call, no reward hooks
                rollout = self._rollout_type(
                    rollout_id=request.rollout_id,
                    termination_reason=SETUP_ERROR,
                    rewards=dict.fromkeys(env.reward_keys, 0.0),
                    messages=cast(Messages, self._transcript),
                    example_args=self._example_args,
                    split=request.split,
                )
        if meter is not None:
            # the rollout's messages: the transcript it was settled with
            meter.report(request, rollout, self._transcript, annotations)
        return rollout

    async def _score(self, reason: str) -> R:
        return await score_rollout(
            self._env,
            self._request,
            self._settings.limits.reward_timeout,
            reason,
            self._transcript,
            self._example_args,
            self._meter,
            rollout_type=self._rollout_type,
        )

    async def _run_in_context(self) -> R:
        """List the tools, open a chat session and run the turn loop within
        ``rollout_timeout``; then score the rollout."""
        from benchmax._modelhttp import ChatSession

        request, settings = self._request, self._settings
        session: ChatSession | None = None
        try:
            deadline = asyncio.timeout(settings.limits.rollout_timeout)
            try:
                async with deadline:
                    tools = await listed_tools(self._env, request.rollout_id)
                    if isinstance(tools, str):  # the reason listing failed with
                        return await self._score(tools)
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
                    reason = await self._turn_loop(tools, session)
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
            return await self._score(reason)
        finally:
            if session is not None:
                await session.aclose()

    async def _turn_loop(self, tools: list[Tool], session: ChatSession) -> str:
        from benchmax._modelhttp import CallFailure

        request, settings = self._request, self._settings
        transcript, meter = self._transcript, self._meter
        rollout_id = request.rollout_id
        advertised = advertised_tool_names(tools)
        checks = ArgumentChecks(tools)
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
            decoded = await call_model(session, body, meter)
            if isinstance(decoded, CallFailure):
                logger.log(
                    decoded.level,
                    "base.rollout.model_failed rollout_id=%s termination_reason=%s",
                    rollout_id,
                    decoded.termination_reason,
                    exc_info=decoded.error,
                )
                return decoded.termination_reason
            reply = read_reply(
                decoded, taken_ids=self._call_ids, finish_reasons=settings.finish_reasons
            )
            tokens = (
                read_call_tokens(decoded)
                if settings.record_tokens and not isinstance(reply, ReplyFailure)
                else None
            )
            if meter is not None:
                meter.usage = add_usage(meter.usage, reply.usage)
                kept = isinstance(reply, Reply) and not isinstance(tokens, TokenDeficiency)
                meter.describe_call(
                    reply, len(transcript) if kept else None, tokens, reply_weights_version(decoded)
                )
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
                answer = await self._user_answer()
                if answer is None:
                    return FINISHED
                if not isinstance(answer, dict):  # the reason the user turn failed with
                    return answer
                if sent is transcript:  # send_reasoning: from now on, a copy without markers
                    sent = list(transcript)
                transcript.append(answer)
                sent.append({"role": "user", "content": answer["content"]})
                continue
            self._call_ids.update(call.id for call in calls)
            if (
                settings.limits.max_tool_calls is not None
                and self._tool_calls_used + len(calls) > settings.limits.max_tool_calls
            ):
                return TOOL_BUDGET_EXCEEDED
            self._tool_calls_used += len(calls)
            try:
                tool_messages = await run_tool_calls(
                    self._env, rollout_id, calls, advertised, checks, settings.tools, meter
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
                _log_failure("tool_failed", rollout_id, failure)
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

    async def _user_answer(self) -> dict[str, Any] | str | None:
        """Ask ``user_turn`` for the next message: the marked user message, ``None`` (the
        rollout ends) or the termination reason it failed with (logged)."""
        env, request, transcript = self._env, self._request, self._transcript
        deadline = self._settings.user_turn
        rollout_id = request.rollout_id
        timer = asyncio.timeout(deadline.seconds)
        try:
            with (
                hook_errors(env, "user_turn"),
                stray_cancellation_as_error(hook_name(env, "user_turn")),
            ):
                async with timer:
                    answer: object = await env.user_turn(
                        rollout_id, [dict(message) for message in transcript], request.example
                    )
        except RolloutFailure as failure:
            _log_failure("user_failed", rollout_id, failure)
            return failure.termination_reason
        except Exception as error:
            if isinstance(error, TimeoutError) and timer.expired():
                logger.error(
                    "base.rollout.user_failed rollout_id=%s termination_reason=%s: %s",
                    rollout_id,
                    SIMULATED_USER_ERROR,
                    deadline.expired_message("user_turn", error, type(env).user_turn),
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
            with hook_errors(env, "user_turn"):
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


def _log_failure(event: str, rollout_id: str, failure: RolloutFailure) -> None:
    """Log ``base.rollout.<event>`` for a hook that failed with ``failure``'s reason."""
    logger.error(
        "base.rollout.%s rollout_id=%s termination_reason=%s: %s",
        event,
        rollout_id,
        failure.termination_reason,
        failure,
        exc_info=failure,
    )
