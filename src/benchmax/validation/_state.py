"""The state one validation shares between its checks, and the wording they share."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmax._mock_url import substitute_mock
from benchmax._secret_masking import credential_secrets, mask_secrets
from benchmax.envs.environment import Environment
from benchmax.envs.shared_types import DatasetSplit, Example
from benchmax.testing import MockModelServer
from benchmax.validation._config import ValidationConfig
from benchmax.validation._report import CheckResult, CheckStatus

__all__ = [
    "Records",
    "Split",
    "Validation",
    "capturing_logs",
    "error_text",
    "listed",
    "substitute_mock",
]

_MAX_LISTED = 3


def error_text(error: BaseException) -> str:
    notes = " ".join(getattr(error, "__notes__", ()))
    text = f"{type(error).__name__}: {error}"
    return f"{text} ({notes})" if notes else text


def listed(items: Sequence[str]) -> str:
    shown = "; ".join(items[:_MAX_LISTED])
    more = len(items) - _MAX_LISTED
    return f"{shown}; and {more} more" if more > 0 else shown


class Records(logging.Handler):
    """Keeps the warnings and errors logged while validating (reasons for failed rollouts)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def errors_since(self, start: int) -> list[str]:
        return [
            " ".join(r.getMessage().split())
            for r in self.records[start:]
            if r.levelno >= logging.ERROR
        ]


@contextlib.contextmanager
def capturing_logs() -> Iterator[Records]:
    handler = Records()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield handler
    finally:
        root.removeHandler(handler)


@dataclass
class Split:
    name: DatasetSplit
    examples: list[Example[object]]


@dataclass
class Validation:
    """The checks of one validation, in the order they ran."""

    env_class: type[Environment[Any, Any]]
    config: ValidationConfig
    mock: MockModelServer
    logs: Records
    checks: list[CheckResult] = field(default_factory=list)

    def add(self, name: str, status: CheckStatus, detail: str = "") -> CheckResult:
        detail = mask_secrets(detail, self._secrets())
        check = CheckResult(name=name, status=status, detail=detail)
        self.checks.append(check)
        return check

    def _secrets(self) -> tuple[str, ...]:
        """Credentials that must never appear in a check's detail."""
        config = self.config
        return credential_secrets(
            [config.model_auth, *config.auth_providers.values()], config.base_url
        )

    @property
    def constructor_args(self) -> dict[str, object]:
        url = self.mock.base_url
        return {
            name: substitute_mock(value, url)
            for name, value in self.config.constructor_args.items()
        }
