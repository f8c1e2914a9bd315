"""Naming the user hook behind a contract error, so a runner can say which hook broke it.

A contract error raised by (or about the result of) an environment hook carries the
note ``"benchmax: raised by <Class>.<hook>"`` (``BaseException.add_note``), e.g.
``benchmax: raised by MathEnv.compute_reward``. The first note wins: an error that
passes through several hooks names the innermost one.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from benchmax.envs.errors import EnvError
from benchmax.envs.shared_types import RolloutFailure

__all__ = [
    "HOOK_NOTE_PREFIX",
    "NotAsyncHook",
    "blame_hook",
    "exits_as_errors",
    "hook_errors",
    "hook_of",
    "must_await",
]

HOOK_NOTE_PREFIX = "benchmax: raised by "


def hook_of(error: BaseException) -> str | None:
    """The ``<Class>.<hook>`` a note on ``error`` names, or ``None``."""
    for note in getattr(error, "__notes__", ()):
        if isinstance(note, str) and note.startswith(HOOK_NOTE_PREFIX):
            return note[len(HOOK_NOTE_PREFIX) :]
    return None


def blame_hook(error: BaseException, owner: object, hook: str) -> None:
    """Note that ``owner``'s ``hook`` raised ``error`` (unless a hook is named already).

    Only contract errors get the note: ``RolloutFailure`` settles a rollout, and
    ``BaseException``s that are not ``Exception``s (cancellation) are left alone.
    """
    if not isinstance(error, Exception) or isinstance(error, RolloutFailure):
        return
    if hook_of(error) is None:
        error.add_note(f"{HOOK_NOTE_PREFIX}{type(owner).__name__}.{hook}")


@contextmanager
def hook_errors(owner: object, hook: str) -> Iterator[None]:
    """Blame ``owner``'s ``hook`` for any contract error raised in the block.

    A ``SystemExit`` from the hook (``sys.exit()`` in user code) becomes a ``RuntimeError``
    saying so: raised in a task, it would otherwise escape the event loop and end the
    process without a word, losing the group.
    """
    try:
        with exits_as_errors(owner, hook):
            yield
    except Exception as error:
        blame_hook(error, owner, hook)
        raise


@contextmanager
def exits_as_errors(owner: object, hook: str) -> Iterator[None]:
    """Turn a ``SystemExit`` raised in the block into a ``RuntimeError`` naming ``hook``
    (for hooks whose errors settle a rollout rather than break the contract)."""
    try:
        yield
    except SystemExit as exit_error:
        raise RuntimeError(
            f"{type(owner).__name__}.{hook} called sys.exit({exit_error.code!r})"
        ) from exit_error


class NotAsyncHook(EnvError, TypeError):
    """An async hook was written as a plain function (``def`` instead of ``async def``):
    a contract error, raised out of the rollout, never settled as its outcome."""


def must_await(owner: object, hook: str, produced: Any) -> Any:
    """``produced`` (what calling ``owner``'s ``hook`` returned) when it is awaitable;
    else ``NotAsyncHook`` naming the hook and the fix, blamed on the hook."""
    if inspect.isawaitable(produced):
        return produced
    error = NotAsyncHook(
        f"{type(owner).__name__}.{hook} is not async: it returned "
        f"{type(produced).__name__} instead of an awaitable; write it as "
        f"'async def {hook}(...)'"
    )
    blame_hook(error, owner, hook)
    raise error
