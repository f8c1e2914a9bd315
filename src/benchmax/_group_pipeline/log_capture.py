"""Capture log records during a run and file them under the rollouts they belong to.

A record belongs to a rollout when it names it in a structured field or is emitted in
its context, checked in this order:

1. ``rollout_id`` attribute (``logger.warning(..., extra={"rollout_id": rid})``): that
   rollout. The library's own ``run_group`` records carry it.
2. ``rollout_ids`` attribute (a sequence of ids): each of those rollouts (``run_group``'s
   group-step records name the rollouts the group step scored).
3. Emitted inside a rollout's context (``_CURRENT_ROLLOUT_ID``): that rollout.
4. Emitted inside a group hook (``_CURRENT_GROUP_RIDS``): every rollout of the hook.

Only rollouts the runner tracks are considered; message texts are never parsed. The
handler is attached to the root logger for the run only; known secrets are masked in
what it keeps.

A record no rollout owns goes where it would have gone without this handler: when no other
handler would see it, Python's last-resort handler prints it (WARNING and above, to stderr),
with known secrets masked. With ``pass_on=True`` a record a rollout owns goes there too (it
is kept *and* printed as if nothing captured it): what ``collect_group`` and validation
want, where the terminal is the user's. Several captures may be attached at once (groups
collected side by side); other captures do not count as handlers that see a record, and
an unowned record is printed once, by the first capture attached, masked with every
capture's secrets.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime

from benchmax._context import CURRENT_GROUP_RIDS, CURRENT_ROLLOUT_ID
from benchmax._secret_masking import mask_secrets
from benchmax.trajectory import LogEntry

__all__ = ["RolloutLogCapture"]


class RolloutLogCapture(logging.Handler):
    """A handler that keeps records of tracked rollouts until the runner takes them."""

    def __init__(self, level: int, secrets: Sequence[str] = (), *, pass_on: bool = False) -> None:
        super().__init__(level)
        self._secrets: dict[str, None] = dict.fromkeys(secrets)
        self._pass_on_owned = pass_on
        self._records: dict[str, list[LogEntry]] = {}
        self._formatter = logging.Formatter()

    def mask_also(self, secrets: Iterable[str]) -> None:
        """Mask ``secrets`` too from now on."""
        self._secrets.update(dict.fromkeys(secrets))

    def track(self, rollout_ids: Sequence[str]) -> None:
        for rollout_id in rollout_ids:
            self._records.setdefault(rollout_id, [])

    def take(self, rollout_id: str) -> list[LogEntry]:
        """Remove and return the records filed under ``rollout_id``."""
        return self._records.pop(rollout_id, [])

    def emit(self, record: logging.LogRecord) -> None:
        try:
            owners = self._owners(record)
            if not owners:
                # Several captures attached: the first decides, so it is printed once.
                captures = list(_ATTACHED)
                if captures and captures[0] is not self:
                    return
                if not any(c._owners(record) for c in captures[1:]):
                    self._pass_on(record)
                return
            entry = self._entry(record)
            for owner in owners:
                self._records[owner].append(entry)
            if self._pass_on_owned:
                self._pass_on(record)
        except Exception:
            self.handleError(record)

    def _owners(self, record: logging.LogRecord) -> tuple[str, ...]:
        named = getattr(record, "rollout_id", None)
        if isinstance(named, str):
            candidates: Sequence[str] = (named,)
        elif isinstance(ids := getattr(record, "rollout_ids", None), (list, tuple)):
            candidates = ids
        elif (current := CURRENT_ROLLOUT_ID.get()) is not None:
            candidates = (current,)
        else:
            candidates = CURRENT_GROUP_RIDS.get() or ()
        return tuple(r for r in dict.fromkeys(candidates) if r in self._records)

    def _pass_on(self, record: logging.LogRecord) -> None:
        """Hand a record to the last-resort handler if no handler but captures sees it."""
        last_resort = logging.lastResort
        if last_resort is None or record.levelno < last_resort.level:
            return
        logger: logging.Logger | None = logging.getLogger(record.name)
        while logger is not None:
            if any(not isinstance(handler, RolloutLogCapture) for handler in logger.handlers):
                return
            logger = logger.parent if logger.propagate else None
        secrets = [
            *self._secrets,
            *(s for c in list(_ATTACHED) if c is not self for s in c._secrets),
        ]
        masked = logging.makeLogRecord(record.__dict__)
        masked.msg, masked.args, masked.exc_info = (
            mask_secrets(record.getMessage(), secrets),
            None,
            None,
        )
        if record.exc_info or record.exc_text:
            masked.exc_text = mask_secrets(self._exception(record), secrets)
        last_resort.handle(masked)

    def _exception(self, record: logging.LogRecord) -> str:
        if record.exc_info:
            return self._mask(self._formatter.formatException(record.exc_info))
        return self._mask(record.exc_text or "")

    def _entry(self, record: logging.LogRecord) -> LogEntry:
        entry: LogEntry = {
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
        _ATTACHED.append(self)
        try:
            yield self
        finally:
            _ATTACHED.remove(self)
            root.removeHandler(self)


_ATTACHED: list[RolloutLogCapture] = []
"""The captures attached to the root logger, in the order they were attached."""
