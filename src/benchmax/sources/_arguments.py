"""Checks every source applies to its constructor arguments, with messages naming the
source and the argument (``"OpenEnvEnv episodes must be ..."``)."""

from __future__ import annotations

from collections.abc import Mapping

from benchmax._value_checks import is_int_at_least
from benchmax.envs import canonical_example_id

__all__ = ["checked_count", "checked_json", "checked_object"]


def checked_count(owner: str, name: str, value: object, *, below: int) -> int:
    """``value`` when it is an integer from 1 to ``below - 1``; ``ValueError`` otherwise."""
    if not is_int_at_least(value, 1) or value >= below:
        raise ValueError(f"{owner} {name} must be an integer from 1 to {below - 1}, not {value!r}")
    return value


def checked_object(
    owner: str, name: str, value: object, *, json_data: bool = False
) -> dict[str, object]:
    """A copy of ``value`` when it is a mapping with string keys, ``{}`` for ``None``;
    ``TypeError`` otherwise. With ``json_data`` the mapping must be JSON data too
    (:func:`checked_json`)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
        raise TypeError(f"{owner} {name} must be a JSON object, not {value!r}")
    if json_data:
        checked_json(owner, name, value)
    return dict(value)


def checked_json(owner: str, name: str, value: Mapping[str, object]) -> None:
    """``ValueError`` when ``value`` is not JSON data (checked as example ids are)."""
    try:
        canonical_example_id(value)
    except ValueError as error:
        raise ValueError(f"{owner} {name} must be JSON: {error}") from None
