"""Value predicates shared by every layer's validation (auth, envs, rewards, runner, ...)."""

from __future__ import annotations

import math
from typing import TypeGuard

__all__ = [
    "TOKEN_ID_BOUND",
    "check_non_empty_str",
    "is_finite_number",
    "is_int_at_least",
    "is_non_empty_str",
    "is_numeric",
]

TOKEN_ID_BOUND = 2**63
"""Token ids are integers in ``[0, TOKEN_ID_BOUND)``: what an ``int64`` tensor (torch's
``long``, every trainer's id type) holds. A larger id can only be a server's or an edit's
mistake, and would overflow when samples are built."""


def is_non_empty_str(value: object) -> TypeGuard[str]:
    """Whether ``value`` is a ``str`` with non-whitespace content."""
    return isinstance(value, str) and bool(value.strip())


def check_non_empty_str(value: object, name: str) -> None:
    """Raise ``ValueError("<name> must be a non-empty string")`` unless ``is_non_empty_str``."""
    if not is_non_empty_str(value):
        raise ValueError(f"{name} must be a non-empty string")


def is_numeric(value: object) -> TypeGuard[int | float]:
    """Whether ``value`` is an ``int`` or ``float`` (never a ``bool``)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_int_at_least(value: object, minimum: int) -> TypeGuard[int]:
    """Whether ``value`` is an ``int`` (never a ``bool``) of at least ``minimum``."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def is_finite_number(value: object) -> TypeGuard[int | float]:
    """Whether ``value`` is numeric and finite (a huge ``int`` that overflows a float is not)."""
    if not is_numeric(value):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int too large for a float
        return False
