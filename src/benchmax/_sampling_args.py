"""Validation of sampling args: extra chat-completions body fields (``temperature``, ...)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["RESERVED_BODY_KEYS", "merged_sampling_args", "validated_sampling_args"]

RESERVED_BODY_KEYS = frozenset({"model", "messages", "tools"})
"""Body fields the chat loop sets itself; sampling args may not replace them."""


def validated_sampling_args(value: object, owner: str = "sampling_args") -> dict[str, Any]:
    """A plain-dict copy of ``value`` after checking it can extend a request body.

    Raises ``TypeError`` when ``value`` is not a mapping with string keys and
    ``ValueError`` naming the key when it sets ``model``, ``messages`` or
    ``tools``, sets a truthy ``stream`` (``stream: false`` is allowed), sets ``n`` to
    anything but 1 (the chat loop reads one choice per call: a group's rollouts are
    ``group_size`` separate calls), or its value is not JSON-serializable (finite numbers
    only).
    """
    if not isinstance(value, Mapping):
        raise TypeError(f"{owner} must be a mapping of request body fields")
    checked: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key:
            raise TypeError(f"{owner} keys must be non-empty strings")
        if key in RESERVED_BODY_KEYS:
            raise ValueError(f"{owner} must not set {key!r} (the chat loop sets it)")
        if key == "stream" and item:
            raise ValueError(
                f"{owner} must not set 'stream' to true (the chat loop reads whole replies)"
            )
        if key == "n" and (type(item) is not int or item != 1):
            raise ValueError(
                f"{owner}['n'] must be 1, got {item!r}: each call's first choice is read, so"
                " more would be generated and dropped; a group of N rollouts is group_size=N"
                " (-k N on the command line)"
            )
        try:
            json.dumps(item, allow_nan=False)
        except (TypeError, ValueError):
            raise ValueError(f"{owner}[{key!r}] must be JSON-serializable") from None
        checked[key] = item
    return checked


def merged_sampling_args(*layers: Mapping[str, Any]) -> dict[str, Any]:
    """Later layers win: ``merged_sampling_args(env, run, request)``."""
    merged: dict[str, Any] = {}
    for layer in layers:
        merged.update(layer)
    return merged
