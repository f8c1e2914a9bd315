"""Entering and leaving a ``BaseEnv``'s ``rollout_context`` for one rollout, within the
runner's deadline for it: a setup failure is logged and settles the rollout as
``setup_error``; a failure while leaving is logged and never replaces the outcome."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from benchmax._cancellation import stray_cancellation_as_error
from benchmax._hook_deadlines import HookDeadline
from benchmax.envs._hook_errors import exits_as_errors, hook_errors
from benchmax.envs.base._rollout_hooks import RolloutHooks, hook_name
from benchmax.envs.shared_types import RolloutFailure

__all__ = ["entered", "leaving"]

logger = logging.getLogger("benchmax.envs.base.env")


async def entered(
    env: RolloutHooks[Any],
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
            stray_cancellation_as_error(hook_name(env, "rollout_context")),
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
                _expired_message(env, deadline, "entering", error),
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
async def leaving(
    env: RolloutHooks[Any],
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
    env: RolloutHooks[Any],
    context: AbstractAsyncContextManager[object],
    rollout_id: str,
    error: BaseException | None,
    deadline: HookDeadline,
) -> None:
    timer = asyncio.timeout(deadline.seconds)
    try:
        with stray_cancellation_as_error(hook_name(env, "rollout_context")):
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
                _expired_message(env, deadline, "leaving", exit_error),
            )
            return
        logger.error(
            "base.rollout.teardown_failed rollout_id=%s: rollout_context raised on exit: %s",
            rollout_id,
            exit_error,
            exc_info=exit_error,
        )


def _expired_message(
    env: RolloutHooks[Any], deadline: HookDeadline, phase: str, error: BaseException
) -> str:
    """The deadline's message for ``rollout_context`` that ran out while ``phase``
    (``"entering"`` or ``"leaving"``)."""
    return deadline.expired_message(f"rollout_context ({phase})", error, type(env).rollout_context)
