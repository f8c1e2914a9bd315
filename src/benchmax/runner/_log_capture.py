"""Capture log records during a run and file them under the rollouts they belong to.

A record belongs to a rollout when it is emitted inside that rollout's context
(``_CURRENT_ROLLOUT_ID``), inside a group hook (``_CURRENT_GROUP_RIDS``: every rollout of
the hook), or when it is a ``run_group`` record naming it (``rollout_id=<id>``; records
naming ``rollout_id=group`` go to every rollout of that group). The handler is attached to
the root logger for the run only; known secrets are masked in what it keeps.

A record no rollout owns goes where it would have gone without this handler: when no other
handler would see it, Python's last-resort handler prints it (WARNING and above, to stderr),
with known secrets masked.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from benchmax.envs.logging import _CURRENT_GROUP_RIDS, _CURRENT_ROLLOUT_ID
from benchmax.runner._config import mask_secrets

__all__ = ["RolloutLogCapture", "running_group"]

_RUN_GROUP_LOGGER = "benchmax.envs.environment"
_NAMED_ROLLOUT = re.compile(r"\brollout_id=(\S+)")
_RUNNING_GROUP: ContextVar[tuple[str, ...] | None] = ContextVar(
    "benchmax_runner_group", default=None
)


@contextlib.contextmanager
def running_group(rollout_ids: Sequence[str]) -> Iterator[None]:
    """Mark the group the current task is running (for records naming ``rollout_id=group``)."""
    token = _RUNNING_GROUP.set(tuple(rollout_ids))
    try:
        yield
    finally:
        _RUNNING_GROUP.reset(token)


class RolloutLogCapture(logging.Handler):
    """A handler that keeps records of tracked rollouts until the runner takes them."""

    def __init__(self, level: int, secrets: Sequence[str] = ()) -> None:
        super().__init__(level)
        self._secrets = tuple(secrets)
        self._records: dict[str, list[dict[str, Any]]] = {}
        self.setFormatter(logging.Formatter())

    def track(self, rollout_ids: Sequence[str]) -> None:
        for rollout_id in rollout_ids:
            self._records.setdefault(rollout_id, [])

    def take(self, rollout_id: str) -> list[dict[str, Any]]:
        """Remove and return the records filed under ``rollout_id``."""
        return self._records.pop(rollout_id, [])

    def emit(self, record: logging.LogRecord) -> None:
        try:
            owners = self._owners(record)
            if not owners:
                self._pass_on(record)
                return
            entry = self._entry(record)
            for owner in owners:
                self._records[owner].append(entry)
        except Exception:
            self.handleError(record)

    def _owners(self, record: logging.LogRecord) -> tuple[str, ...]:
        current = _CURRENT_ROLLOUT_ID.get()
        if current is not None:
            return (current,) if current in self._records else ()
        group = _CURRENT_GROUP_RIDS.get()
        if group is None and record.name == _RUN_GROUP_LOGGER:
            match = _NAMED_ROLLOUT.search(record.getMessage())
            if match is not None and match.group(1) != "group":
                return (match.group(1),) if match.group(1) in self._records else ()
            group = _RUNNING_GROUP.get()
        return tuple(r for r in group or () if r in self._records)

    def _pass_on(self, record: logging.LogRecord) -> None:
        """Hand an unowned record to the last-resort handler if no other handler sees it."""
        last_resort = logging.lastResort
        if last_resort is None or record.levelno < last_resort.level:
            return
        logger: logging.Logger | None = logging.getLogger(record.name)
        while logger is not None:
            if any(handler is not self for handler in logger.handlers):
                return
            logger = logger.parent if logger.propagate else None
        masked = logging.makeLogRecord(record.__dict__)
        masked.msg, masked.args, masked.exc_info = self._mask(record.getMessage()), None, None
        if record.exc_info or record.exc_text:
            masked.exc_text = self._exception(record)
        last_resort.handle(masked)

    def _exception(self, record: logging.LogRecord) -> str:
        if record.exc_info:
            return self._mask(self.formatter.formatException(record.exc_info))
        return self._mask(record.exc_text or "")

    def _entry(self, record: logging.LogRecord) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": self._mask(record.getMessage()),
        }
        if record.exc_info or record.exc_text:
            entry["exception"] = self._exception(record)
        return entry

    def _mask(self, text: str) -> str:
        return mask_secrets(text, self._secrets)

    @contextlib.contextmanager
    def attached(self) -> Iterator[RolloutLogCapture]:
        """Attach to the root logger for the duration of the block."""
        root = logging.getLogger()
        root.addHandler(self)
        try:
            yield self
        finally:
            root.removeHandler(self)
