"""BaseEnv's limits, declared once: the ``Limits`` record.

Each field of ``Limits`` is one limit: its type, its default (BaseEnv's class attribute
value), what it means, how it is validated (``check``) and, when ``benchmax run`` offers it,
its command-line option. Everything else is derived from the fields: BaseEnv's
constructor overrides and validation (``Limits.of``), the limits a rollout runs with, the
``limits`` a run definition records and a resume compares (``recorded_limits``), the
``run`` options (``LIMIT_OPTIONS``), and what the CLI and a Ray worker apply to an
environment (``apply_limits``, the one place a limit is set on an instance).

Adding a limit (recipe):

1. add its field below, ``name: type = _limit(default, check, "what it means",
   option=_Option(...))`` (``option`` only if ``benchmax run`` should offer it; a timeout
   ``benchmax run`` offers: ``_timeout("what it means", flag, option_help)``);
2. declare it on ``BaseEnv`` as a class attribute and a keyword-only ``__init__``
   parameter (BaseEnv's public surface is written out there for readers and type
   checkers; ``tests/envs/base/test_limits.py`` fails until both match the record);
3. read it where it acts: ``Limits.of(env).<name>`` (``BaseEnv.run_rollout`` reads the
   record once per rollout);
4. test its validation message, its effect, and (if it has one) its ``run`` option.

Validation messages are the 0.2 contract's: ``"max_turns must be a positive integer"``,
``"max_tool_calls must be a non-negative integer"``, ``"<name> must be a positive number or
None"`` for each timeout, ``"model_retries must be a non-negative integer"``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Final, Literal

from benchmax._value_checks import is_finite_number, is_int_at_least

__all__ = [
    "LIMIT_NAMES",
    "LIMIT_OPTIONS",
    "LimitOption",
    "Limits",
    "apply_limits",
    "recorded_limits",
]


@dataclass(frozen=True, slots=True)
class _Check:
    """A limit's validation: ``accepts(value)``, else ``ValueError(message % name)``."""

    accepts: Callable[[object], bool]
    message: str


_POSITIVE_COUNT_OR_NONE = _Check(
    lambda v: v is None or is_int_at_least(v, 1), "%s must be a positive integer"
)
_COUNT_OR_NONE = _Check(
    lambda v: v is None or is_int_at_least(v, 0), "%s must be a non-negative integer"
)
_COUNT = _Check(lambda v: is_int_at_least(v, 0), "%s must be a non-negative integer")
_SECONDS_OR_NONE = _Check(
    lambda v: v is None or (is_finite_number(v) and v > 0), "%s must be a positive number or None"
)


@dataclass(frozen=True, slots=True)
class LimitOption:
    """A limit's ``benchmax run`` option: ``flag``, ``metavar``, ``help`` and the kind of
    value it parses (``"seconds"``: a positive number; ``"count"``: an integer >= 0)."""

    flag: str
    metavar: str
    help: str
    kind: Literal["seconds", "count"]


def _limit(
    default: int | None, check: _Check, doc: str, *, option: LimitOption | None = None
) -> Any:
    return field(default=default, metadata={"check": check, "doc": doc, "option": option})


def _timeout(doc: str, flag: str, option_help: str) -> Any:
    """A timeout limit (seconds or ``None``, default ``None``) that ``benchmax run`` offers
    as ``flag SECONDS``."""
    return _limit(
        None, _SECONDS_OR_NONE, doc, option=LimitOption(flag, "SECONDS", option_help, "seconds")
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """The limits one rollout runs with (seconds, counts; ``None``: no limit).

    Raises ``ValueError`` naming the first invalid limit, in field order.
    """

    max_turns: int | None = _limit(
        None,
        _POSITIVE_COUNT_OR_NONE,
        "maximum number of model calls per rollout; must be set before a rollout runs",
    )
    max_tool_calls: int | None = _limit(
        None, _COUNT_OR_NONE, "total tool-call budget per rollout (tool_budget_exceeded)"
    )
    model_timeout: float | None = _timeout(
        "seconds for one HTTP attempt of a model call (model_timeout); None: 600 s",
        "--model-timeout",
        "Seconds for one model call attempt (BaseEnv).",
    )
    model_retries: int = _limit(
        0,
        _COUNT,
        "extra attempts of one model call after a transient failure",
        option=LimitOption(
            "--model-retries",
            "N",
            "Retries of a model call after a transient failure (BaseEnv).",
            "count",
        ),
    )
    tool_timeout: float | None = _timeout(
        "seconds for one run_tool call (tool_timeout)",
        "--tool-timeout",
        "Seconds for one tool call (BaseEnv).",
    )
    rollout_timeout: float | None = _timeout(
        "seconds from entering rollout_context to the end of the chat/tool loop "
        "(rollout_timeout; compute_reward not included)",
        "--rollout-timeout",
        "Seconds for a whole rollout (BaseEnv).",
    )
    reward_timeout: float | None = _timeout(
        "seconds for one compute_reward call (reward_timeout)",
        "--reward-timeout",
        "Seconds for scoring one rollout (BaseEnv).",
    )

    def __post_init__(self) -> None:
        for item in fields(self):
            check: _Check = item.metadata["check"]
            if not check.accepts(getattr(self, item.name)):
                raise ValueError(check.message % item.name)

    @classmethod
    def of(cls, env: object) -> Limits:
        """The limits in effect on ``env`` (its instance or class attributes; a missing
        one has its default). Raises ``ValueError`` as the constructor does."""
        values: dict[str, Any] = {name: getattr(env, name, _DEFAULTS[name]) for name in LIMIT_NAMES}
        return cls(**values)


LIMIT_NAMES: Final = tuple(item.name for item in fields(Limits))
"""Every limit's name, in field order (the order of validation and of the record)."""

_DEFAULTS: Final[Mapping[str, object]] = {
    item.name: item.default for item in dataclasses.fields(Limits)
}

LIMIT_OPTIONS: Final = tuple(
    (item.name, item.metadata["option"])
    for item in fields(Limits)
    if item.metadata["option"] is not None
)
"""``(limit name, LimitOption)`` of every limit ``benchmax run`` offers, in field order."""


def apply_limits(env: object, values: Mapping[str, object]) -> None:
    """Set each limit of ``values`` on ``env`` (an instance attribute overriding its class's
    value), after checking every name and value.

    Raises ``ValueError`` for a name that is not a limit, or for an invalid value (the
    record's message); nothing is set then.
    """
    unknown = sorted(set(values) - set(LIMIT_NAMES))
    if unknown:
        raise ValueError(f"not limits: {', '.join(unknown)} (limits: {', '.join(LIMIT_NAMES)})")
    checked: dict[str, Any] = {**_DEFAULTS, **values}
    Limits(**checked)  # raises for an invalid value
    for name, value in values.items():
        setattr(env, name, value)


def recorded_limits(env: object) -> dict[str, Any]:
    """The limits a run definition records for ``env``: each limit it has whose value is
    ``None`` or a finite number (what changes outcomes; an invalid value is left to the
    rollout's own validation), in field order. ``{}`` for environments without limits."""
    recorded: dict[str, Any] = {}
    for name in LIMIT_NAMES:
        value = getattr(env, name, _MISSING)
        if value is None or (
            isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        ):
            recorded[name] = value
    return recorded


_MISSING: Final = object()
