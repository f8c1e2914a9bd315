"""Credentials for a run: bearer keys read from environment variables, injected-auth names."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from benchmax.auth import InjectedAuth, StaticBearerAuth
from benchmax.cli._targets import TargetError

__all__ = ["MOCK_KEY", "auth_variables", "bearer_from_variable", "injected_auth_names"]

MOCK_KEY = "benchmax-mock-key"
"""The dummy bearer key every credential gets when the embedded mock model answers."""

_MAX_DEPTH = 8


def auth_variables(pairs: Sequence[str]) -> dict[str, str]:
    """``NAME=VAR`` pairs of ``--auth`` as ``{name: variable}``."""
    bindings: dict[str, str] = {}
    for pair in pairs:
        name, equals, variable = pair.partition("=")
        if not equals or not name.strip() or not variable.strip():
            raise TargetError(f"invalid --auth {pair!r}: expected NAME=ENV_VARIABLE")
        bindings[name.strip()] = variable.strip()
    return bindings


def bearer_from_variable(variable: str, option: str) -> StaticBearerAuth:
    """A bearer auth holding the value of ``variable`` (never echoed anywhere)."""
    value = os.environ.get(variable)
    if not value:
        raise TargetError(f"{option} names environment variable {variable}, which is not set")
    return StaticBearerAuth(value)


def injected_auth_names(*roots: Any) -> set[str]:
    """Names of every ``InjectedAuth`` reachable from ``roots`` (attributes, containers)."""
    names: set[str] = set()
    seen: set[int] = set()
    for value in _walk(roots, seen, 0):
        if isinstance(value, InjectedAuth):
            names.add(value.name)
    return names


def _walk(value: Any, seen: set[int], depth: int) -> Iterator[Any]:
    if depth > _MAX_DEPTH or id(value) in seen or isinstance(value, str | bytes | int | float):
        return
    seen.add(id(value))
    yield value
    children: list[Any] = []
    if isinstance(value, Mapping):
        children.extend(value.values())
    elif isinstance(value, list | tuple | set | frozenset):
        children.extend(value)
    elif isinstance(value, type):
        if value.__module__.startswith(("benchmax.", "builtins")):
            return
        children.extend(v for v in vars(value).values() if not callable(v))
    else:
        if dataclasses.is_dataclass(value):
            children.extend(getattr(value, f.name, None) for f in dataclasses.fields(value))
        children.extend(getattr(value, "__dict__", {}).values())
        if not isinstance(value, InjectedAuth) and hasattr(type(value), "__mro__"):
            children.extend(type(value).__mro__)
    for child in children:
        yield from _walk(child, seen, depth + 1)
