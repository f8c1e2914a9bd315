"""Log attribution: context variables naming the rollout or group that is running.

This module only manages the variables; it installs no handlers.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager
from contextvars import ContextVar, Token
from types import TracebackType

from benchmax import _context

__all__ = ["rollout_context", "group_context", "_CURRENT_ROLLOUT_ID", "_CURRENT_GROUP_RIDS"]

_CURRENT_ROLLOUT_ID: ContextVar[str | None] = _context.CURRENT_ROLLOUT_ID
_CURRENT_GROUP_RIDS: ContextVar[tuple[str, ...] | None] = _context.CURRENT_GROUP_RIDS


class _ContextBinding[T](AbstractContextManager[None]):
    """Single-use manager that sets a context variable for the duration of a block."""

    def __init__(self, variable: ContextVar[T | None], value: T) -> None:
        self._variable = variable
        self._value = value
        self._token: Token[T | None] | None = None

    def __enter__(self) -> None:
        self._token = self._variable.set(self._value)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        token, self._token = self._token, None
        try:
            if token is None:
                raise ValueError("context was not entered")
            self._variable.reset(token)
        except (LookupError, ValueError):
            self._variable.set(None)


def rollout_context(rollout_id: str) -> AbstractContextManager[None]:
    """Mark ``rollout_id`` as the running rollout inside the ``with`` block."""
    return _ContextBinding(_CURRENT_ROLLOUT_ID, str(rollout_id))


def group_context(rollout_ids: Iterable[str]) -> AbstractContextManager[None]:
    """Mark the rollouts whose group rewards are being computed inside the block."""
    return _ContextBinding(_CURRENT_GROUP_RIDS, tuple(str(r) for r in rollout_ids))
