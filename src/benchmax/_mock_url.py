"""``@mock``: how constructor arguments name the embedded mock model server's URL."""

from __future__ import annotations

from typing import cast

__all__ = ["MOCK_URL_MARKER", "substitute_mock", "uses_mock"]

MOCK_URL_MARKER = "@mock"
"""A constructor-argument string that stands for the embedded mock server's base URL."""


def substitute_mock[T](value: T, url: str) -> T:
    """Replace every ``"@mock"`` string (also nested in lists and objects) with ``url``."""
    # Each branch gives a value of the type it was given (a str, a list, a dict).
    if isinstance(value, str):
        return cast(T, url) if value == MOCK_URL_MARKER else value
    if isinstance(value, list):
        return cast(T, [substitute_mock(item, url) for item in value])
    if isinstance(value, dict):
        return cast(T, {key: substitute_mock(item, url) for key, item in value.items()})
    return value


def uses_mock(value: object) -> bool:
    """Whether ``value`` contains ``"@mock"`` anywhere (nested lists and objects included)."""
    if isinstance(value, str):
        return value == MOCK_URL_MARKER
    if isinstance(value, list):
        return any(uses_mock(item) for item in value)
    if isinstance(value, dict):
        return any(uses_mock(item) for item in value.values())
    return False
