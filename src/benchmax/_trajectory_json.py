"""Reading the optional parts of a results line (``Trajectory.from_json``): when a
hand-edited line got one wrong, it is dropped rather than refused."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from benchmax._value_checks import is_int_at_least, is_numeric
from benchmax._vocabulary import TOKEN_USAGE_KEYS, TokenUsage

__all__ = ["json_count", "json_object", "json_rewards", "json_timings", "json_usage"]


def json_rewards(value: object) -> dict[str, float]:
    if not isinstance(value, Mapping):
        raise TypeError("rewards is not an object")
    return dict(value)


def json_timings(value: object) -> dict[str, float]:
    if not isinstance(value, Mapping):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and is_numeric(v)}


def json_usage(value: object) -> TokenUsage | None:
    if not isinstance(value, Mapping):
        return None
    kept = {k: v for k, v in value.items() if k in TOKEN_USAGE_KEYS and is_int_at_least(v, 0)}
    return cast(TokenUsage, kept) if kept else None


def json_count(value: object) -> int | None:
    return value if is_int_at_least(value, 0) else None


def json_object(value: object) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): v for k, v in value.items()}
