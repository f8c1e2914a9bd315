"""One JSON line per record, written whatever the record holds, and secrets masked in it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from benchmax._secret_masking import mask_strings

__all__ = ["encoded_line", "mask_strings"]


def encoded_line(record: Mapping[str, Any]) -> bytes:
    """One JSON line, UTF-8; never fails on the values a record holds.

    Text UTF-8 cannot encode (lone surrogates from a model's ``\\ud800`` escape) is written
    as the JSON escape ``\\ud800``, which JSON readers turn back into the same string.
    Keys that are not strings, cycles (``"<cycle>"``), nesting deeper than 200 levels
    (``"<too deep>"``) and objects JSON has no form for are written as text; so is an
    integer too long for Python to write in decimal (more than ``sys.get_int_max_str_digits()``
    digits), as its ``0x`` hexadecimal text. Non-finite floats are written as JSON's
    common extension ``NaN``/``Infinity``/``-Infinity``, which ``json.loads`` reads back.
    """
    try:
        text = json.dumps(record, ensure_ascii=False, default=_text)
    except (TypeError, ValueError, RecursionError):
        text = json.dumps(_plain(record, ()), ensure_ascii=False)
    # Outside strings JSON text is ASCII, and inside them a backslash is escaped, so
    # "backslashreplace" turns exactly the unencodable characters into JSON escapes.
    return (text + "\n").encode("utf-8", "backslashreplace")


def _text(value: object) -> str:
    """What a value JSON cannot represent is written as."""
    try:
        return str(value)
    except Exception:
        return f"<unprintable {type(value).__name__}>"


def _plain(value: Any, seen: tuple[int, ...]) -> Any:
    """``value`` as plain JSON data: string keys, no cycles, text for anything else."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if _decimal_writable(value) else hex(value)
    if value is None or isinstance(value, str | float | bool):
        return value
    if id(value) in seen or len(seen) > 200:
        return "<cycle>" if id(value) in seen else "<too deep>"
    inner = (*seen, id(value))
    if isinstance(value, Mapping):
        return {_key(key): _plain(item, inner) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item, inner) for item in value]
    return _text(value)


def _decimal_writable(value: int) -> bool:
    try:
        str(value)
    except ValueError:  # more digits than sys.get_int_max_str_digits() allows
        return False
    return True


def _key(key: object) -> str:
    return key if isinstance(key, str) else _text(key)
