"""Telling a real cancellation from a stray ``asyncio.CancelledError`` raised by user code.

A task is being cancelled while ``asyncio.current_task().cancelling()`` is above zero
(the run stopping, a sibling failing, an ``asyncio.timeout`` expiring). A
``CancelledError`` that reaches a hook's caller while it is zero was raised by the hook
itself (e.g. awaiting a task it cancelled, or re-raising one from a library): that is a
failure of the hook, not a reason to stop the group (``beyond.md`` §9).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

from benchmax.errors import BenchmaxError

__all__ = ["StrayCancellation", "stray_cancellation_as_error"]


class StrayCancellation(BenchmaxError, RuntimeError):
    """User code raised ``asyncio.CancelledError`` while its task was not being cancelled."""


@contextmanager
def stray_cancellation_as_error(what: str) -> Iterator[None]:
    """Turn a stray ``CancelledError`` raised in the block into :class:`StrayCancellation`
    (naming ``what``, e.g. ``"MathEnv.compute_reward"``); a real cancellation propagates."""
    try:
        yield
    except asyncio.CancelledError as error:
        task = asyncio.current_task()
        if task is None or task.cancelling() > 0:
            raise
        raise StrayCancellation(
            f"{what} raised asyncio.CancelledError while its task was not being cancelled"
        ) from error
