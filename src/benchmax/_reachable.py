"""Values reachable from an environment: its attributes, containers and classes.

How a run finds what an environment will use without running it: the ``InjectedAuth``
names it needs bound (``benchmax run``/``validate``) and the judges it will call (the
judge check before a run).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

from benchmax.auth import InjectedAuth

__all__ = ["reachable_values"]

_MAX_DEPTH = 8


def reachable_values(*roots: Any) -> Iterator[Any]:
    """Every value reachable from ``roots`` (depth-first, each object once, at most eight
    levels deep): mapping values, sequence and set items, dataclass fields, instance
    attributes and the non-callable class attributes of classes outside benchmax."""
    yield from _walk(roots, set(), 0)


def _walk(value: Any, seen: set[int], depth: int) -> Iterator[Any]:
    if depth > _MAX_DEPTH or id(value) in seen or isinstance(value, str | bytes | int | float):
        return
    seen.add(id(value))
    yield value
    try:
        children = _children(value)
    except Exception:  # a third-party object that refuses to be looked into (pydantic's
        return  # placeholder validators raise on len()): nothing to find inside it
    for child in children:
        yield from _walk(child, seen, depth + 1)


def _children(value: Any) -> list[Any]:
    children: list[Any] = []
    if isinstance(value, Mapping):
        children.extend(value.values())
    elif isinstance(value, list | tuple | set | frozenset):
        children.extend(value)
    elif isinstance(value, type):
        if value.__module__.startswith(("benchmax.", "builtins")):
            return children
        children.extend(v for v in vars(value).values() if not callable(v))
    else:
        if dataclasses.is_dataclass(value):
            children.extend(getattr(value, f.name, None) for f in dataclasses.fields(value))
        children.extend(getattr(value, "__dict__", {}).values())
        if not isinstance(value, InjectedAuth) and hasattr(type(value), "__mro__"):
            children.extend(type(value).__mro__)
    return children
