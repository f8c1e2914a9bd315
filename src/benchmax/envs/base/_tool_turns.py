"""The tools' part of a ``BaseEnv`` rollout: listing them, opening the declared ones
(``tools``) for the rollout, and running one assistant turn's tool calls."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from benchmax._cancellation import stray_cancellation_as_error
from benchmax._hook_deadlines import HookDeadline, deadline_for
from benchmax._modelhttp import ToolCall
from benchmax.envs._hook_errors import hook_errors
from benchmax.envs.base._meter import Meter, timed
from benchmax.envs.base._rollout_hooks import RolloutHooks, hook_name
from benchmax.envs.base._rollout_start import Settings, Transcript
from benchmax.envs.base._tool_calls import (
    ArgumentChecks,
    ToolTimedOut,
    call_problem,
    reserved_argument_message,
    tool_content,
)
from benchmax.envs.base.dataset import JsonRow
from benchmax.envs.base.openai_types import Tool
from benchmax.envs.shared_types import TOOL_TIMEOUT, RolloutRequest
from benchmax.tools import ToolError

__all__ = ["declared_tools", "declares_tools", "listed_tools", "run_tool_calls"]

logger = logging.getLogger("benchmax.envs.base.env")


async def listed_tools(env: RolloutHooks[Any], rollout_id: str) -> list[Tool] | str:
    """``list_tools()``, or ``tool_timeout`` (logged) when it outlived the runner's
    default deadline for tools (the environment's own limits do not bound it)."""
    listing = deadline_for("tools")
    timer = asyncio.timeout(listing.seconds)
    try:
        async with timer:
            with hook_errors(env, "list_tools"):
                return await env.list_tools()
    except TimeoutError as error:
        if not timer.expired():
            raise
        logger.error(
            "base.rollout.tool_failed rollout_id=%s termination_reason=tool_timeout: %s",
            rollout_id,
            listing.expired_message("list_tools", error, type(env).list_tools),
        )
        return TOOL_TIMEOUT


@asynccontextmanager
async def declared_tools(
    env: RolloutHooks[Any], request: RolloutRequest[JsonRow], settings: Settings
) -> AsyncIterator[str | None]:
    """Open ``env.tools`` for the rollout (inside its ``rollout_context``) and close them
    when it ends; yields ``None``, or the termination reason when they did not open."""
    if not declares_tools(env.tools):
        yield None
        return
    from benchmax.envs.base._tool_table import open_declared_tools

    declared, failed = await open_declared_tools(env, request, settings.tools.seconds)
    try:
        yield failed
    finally:
        if declared is not None:
            await declared.aclose(settings.tools.seconds)


def declares_tools(tools: object) -> bool:
    """Whether ``tools`` declares tools for the default ``list_tools``/``run_tool``: a
    list or tuple holding something other than dicts and strings (a hand-written
    environment's own tool specs, which its own ``list_tools`` serves, are left alone)."""
    return isinstance(tools, list | tuple) and any(not isinstance(t, Mapping | str) for t in tools)


async def run_tool_calls(
    env: RolloutHooks[Any],
    rollout_id: str,
    calls: Sequence[ToolCall],
    advertised: frozenset[str],
    checks: ArgumentChecks,
    timeout: HookDeadline,
    meter: Meter | None,
) -> Transcript:
    messages: Transcript = []
    for call in calls:
        name = call.name
        arguments = call.arguments
        spent_before = 0.0 if meter is None else meter.tool
        if name not in advertised:
            content: str | list[Any] = f"Unknown tool: {name}"
        elif isinstance(arguments, str):
            content = arguments
        elif (reserved := reserved_argument_message(arguments)) is not None:
            content = reserved
        elif (invalid := checks.problem(name, arguments)) is not None:
            content = invalid
        elif (refused := call_problem(env.run_tool, rollout_id, arguments)) is not None:
            content = refused
        else:
            try:
                with (
                    timed(meter, "tool"),
                    stray_cancellation_as_error(hook_name(env, "run_tool")),
                ):
                    result = await _call_tool(env, rollout_id, name, arguments, timeout)
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
    env: RolloutHooks[Any],
    rollout_id: str,
    name: str,
    arguments: dict[str, Any],
    timeout: HookDeadline,
) -> object:
    if timeout.seconds is None:
        return await env.run_tool(rollout_id, name, **arguments)
    deadline = asyncio.timeout(timeout.seconds)
    try:
        async with deadline:
            return await env.run_tool(rollout_id, name, **arguments)
    except TimeoutError as error:
        if not deadline.expired():
            raise
        if timeout.default:
            message = timeout.expired_message(
                f"tool {name!r}", error, type(env).run_tool, "tool_timeout"
            )
            raise ToolTimedOut(name, timeout.seconds, message=message) from error
        raise ToolTimedOut(name, timeout.seconds) from error
