"""Canonical example identity: a SHA-256 of a value's JSON semantics.

Ids are independent of mapping key order, number spelling (``1`` and ``1.0``,
``0`` and ``-0.0``) and file location, so the same example always gets the same id.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["canonical_example_id"]

_MAX_SAFE_INTEGER = 2**53 - 1
_ENVELOPE_VERSION = 1


def canonical_example_id(value: Any) -> str:
    """Return the 64-character lowercase hex SHA-256 identity of ``value``.

    Raises ValueError for values without one canonical JSON form: non-finite
    numbers, integers outside JavaScript's safe range, non-string object keys,
    strings that are not valid UTF-8, and non-JSON types (bytes, sets, objects).
    """
    envelope = {"v": _ENVELOPE_VERSION, "value": _normalize(value)}
    text = json.dumps(envelope, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _normalize(value: Any) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return _checked_utf8(value)
    if isinstance(value, int):
        return _normalize_int(value)
    if isinstance(value, float):
        return _normalize_float(value)
    if isinstance(value, Mapping):
        normalized: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError("JSON object keys used for identity must be strings")
            normalized[_checked_utf8(key)] = _normalize(item)
        return normalized
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        return [_normalize(item) for item in value]
    raise ValueError(f"{type(value).__name__} is not JSON-canonicalizable")


def _checked_utf8(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError("strings used for identity must be valid UTF-8") from error
    return text


def _normalize_int(value: int) -> int:
    if not -_MAX_SAFE_INTEGER <= value <= _MAX_SAFE_INTEGER:
        raise ValueError("integers used for identity must fit in JavaScript's safe range")
    # int subclasses (IntEnum members) serialize as their plain integer value.
    return int(value)


def _normalize_float(value: float) -> float | int:
    if not math.isfinite(value):
        raise ValueError("non-finite numbers cannot be used for identity")
    if value == 0:
        return 0
    if value.is_integer():
        return _normalize_int(int(value))
    # float subclasses serialize as their plain float value.
    return float(value)
