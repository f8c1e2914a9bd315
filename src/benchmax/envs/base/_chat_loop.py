"""The body of a ``BaseEnv`` rollout inside its ``rollout_context``: list the tools, open a
chat session, run the turn loop (model call, reply, tool calls or a simulated user's
answer) within ``rollout_timeout``, then score it."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from benchmax._cancellation import stray_cancellation_as_error
from benchmax._modelhttp import (
    TOKEN_REQUEST_FIELDS,
    Reply,
    ReplyFailure,
    TokenDeficiency,
    add_usage,
    read_call_tokens,
    read_reply,
)
from benchmax.auth import ModelRequestContext
from benchmax.envs._hook_deadlines import HookDeadline
from benchmax.envs._hook_errors import hook_errors
from benchmax.envs.base._meter import Meter, call_model
from benchmax.envs.base._rollout_start import Settings, Transcript
from benchmax.envs.base._scoring import score_rollout
from benchmax.envs.base._sent_messages import messages_as_sent
from benchmax.envs.base._tool_calls import ArgumentChecks, ToolTimedOut, advertised_tool_names
from benchmax.envs.base._tool_turns import listed_tools, run_tool_calls
from benchmax.envs.base.dataset import JsonRow
from benchmax.envs.base.openai_types import Tool
from benchmax.envs.shared_types import (
    FINISHED,
    MAX_TURNS_EXCEEDED,
    MODEL_ERROR,
    ROLLOUT_TIMEOUT,
    SIMULATED_USER_ERROR,
    TOOL_BUDGET_EXCEEDED,
    TOOL_ERROR,
    TOOL_TIMEOUT,
    RolloutFailure,
    RolloutRequest,
)
from benchmax.trajectory import SIMULATED_USER_KEY

if TYPE_CHECKING:  # imported on first use: aiohttp costs a quarter second to import
    from benchmax._modelhttp import ChatSession
    from benchmax.envs.base.env import BaseEnv, BaseRollout

__all__ = ["run_in_context"]

logger = logging.getLogger("benchmax.envs.base.env")


async def run_in_context(
    env: BaseEnv,
    request: RolloutRequest[JsonRow],
    settings: Settings,
    transcript: Transcript,
    example_args: dict[str, Any],
    meter: Meter | None,
) -> BaseRollout:
    """List the tools, open a chat session and run the turn loop within
    ``rollout_timeout``; then score the rollout."""
    from benchmax._modelhttp import ChatSession

    session: ChatSession | None = None
    try:
        deadline = asyncio.timeout(settings.limits.rollout_timeout)
        try:
            async with deadline:
                tools = await listed_tools(env, request.rollout_id)
                if isinstance(tools, str):  # the reason listing failed with
                    return await score_rollout(
                        env,
                        request,
                        settings.limits.reward_timeout,
                        tools,
                        transcript,
                        example_args,
                        meter,
                    )
                session = ChatSession(
                    env._model_pool().hold(),
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
                reason = await _turn_loop(env, request, settings, tools, transcript, session, meter)
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
        return await score_rollout(
            env, request, settings.limits.reward_timeout, reason, transcript, example_args, meter
        )
    finally:
        if session is not None:
            await session.aclose()


async def _turn_loop(
    env: BaseEnv,
    request: RolloutRequest[JsonRow],
    settings: Settings,
    tools: list[Tool],
    transcript: Transcript,
    session: ChatSession,
    meter: Meter | None,
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
            answer = await _user_answer(env, request, transcript, settings.user_turn)
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
            tool_messages = await run_tool_calls(
                env, rollout_id, calls, advertised, checks, settings.tools, meter
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
    env: BaseEnv, request: RolloutRequest[JsonRow], transcript: Transcript, deadline: HookDeadline
) -> dict[str, Any] | str | None:
    """Ask ``user_turn`` for the next message: the marked user message, ``None`` (the
    rollout ends) or the termination reason it failed with (logged)."""
    rollout_id = request.rollout_id
    timer = asyncio.timeout(deadline.seconds)
    try:
        with (
            hook_errors(env, "user_turn"),
            stray_cancellation_as_error(env._hook("user_turn")),
        ):
            async with timer:
                answer: object = await env.user_turn(
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
            raise TypeError(f"user_turn must return a string or None, not {type(answer).__name__}")
    if not answer.strip():
        logger.error(
            "base.rollout.user_failed rollout_id=%s termination_reason=%s: "
            "user_turn returned an empty message",
            rollout_id,
            SIMULATED_USER_ERROR,
        )
        return SIMULATED_USER_ERROR
    return {"role": "user", "content": answer, SIMULATED_USER_KEY: True}
