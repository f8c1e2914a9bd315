"""The outcome of validating an environment: one ``CheckResult`` per check."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, get_args

from benchmax._value_checks import is_non_empty_str

__all__ = ["CheckResult", "CheckStatus", "ValidationReport"]

CheckStatus = Literal["passed", "failed", "warning", "skipped"]
"""``failed`` makes the report fail; ``warning`` and ``skipped`` do not."""

_STATUSES: tuple[CheckStatus, ...] = get_args(CheckStatus)


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One check: its name (e.g. ``"dataset eval: ids unique"``), status and the reason.

    ``detail`` says what was found and, for a failure or warning, what to change.
    """

    name: str
    status: CheckStatus
    detail: str = ""

    def __post_init__(self) -> None:
        if not is_non_empty_str(self.name):
            raise ValueError("check name must be a non-empty string")
        if self.status not in _STATUSES:
            raise ValueError(f"check status must be one of {', '.join(_STATUSES)}")
        if not isinstance(self.detail, str):
            raise TypeError("check detail must be a string")

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "status": self.status, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class ValidationReport:
    """Every check run for one environment, in order; ``ok`` when none failed."""

    target: str
    checks: tuple[CheckResult, ...]

    def __post_init__(self) -> None:
        checks = tuple(self.checks)
        if any(not isinstance(check, CheckResult) for check in checks):
            raise TypeError("checks must be CheckResult values")
        object.__setattr__(self, "checks", checks)

    @property
    def ok(self) -> bool:
        return not any(check.status == "failed" for check in self.checks)

    @property
    def counts(self) -> Mapping[str, int]:
        """Checks per status, every status present (zero when none)."""
        found = Counter(check.status for check in self.checks)
        return {status: found[status] for status in _STATUSES}

    def failed(self) -> tuple[CheckResult, ...]:
        return tuple(check for check in self.checks if check.status == "failed")

    def check(self, name: str) -> CheckResult:
        """The check called ``name``; ``KeyError`` when there is none."""
        for check in self.checks:
            if check.name == name:
                return check
        raise KeyError(name)

    def to_json(self) -> dict[str, object]:
        return {
            "target": self.target,
            "ok": self.ok,
            "counts": dict(self.counts),
            "checks": [check.to_json() for check in self.checks],
        }

    @classmethod
    def of(cls, target: str, checks: Iterable[CheckResult]) -> ValidationReport:
        return cls(target=target, checks=tuple(checks))
