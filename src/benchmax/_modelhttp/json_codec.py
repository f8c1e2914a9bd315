"""Request and reply bodies: orjson where it is standard-compliant, ``json`` for the rest.

orjson refuses some inputs the standard library accepts: on decoding, lone UTF-16
surrogate escapes (``"\\ud800"``), ``NaN``/``Infinity`` literals and numbers out of
double range; on encoding, integers beyond 64 bits, non-string keys and strings
holding lone surrogates. Those fall back to ``json`` so every body the OpenAI SDK
would send or read is sent or read here too. Encoded bodies are compact UTF-8
(``separators=(",", ":")``, non-ASCII kept), the bytes the SDK sends; non-finite
floats, which JSON cannot express, are sent as ``null`` (orjson's rule).
"""

from __future__ import annotations

import json

import orjson

from benchmax._json_types import JSONValue

__all__ = ["decode", "encode"]


def encode(value: object) -> bytes:
    """``value`` as a compact UTF-8 JSON document.

    Raises ``TypeError``/``ValueError`` for values JSON cannot carry (e.g. a set).
    """
    try:
        return orjson.dumps(value)
    except TypeError:
        pass
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        return text.encode()
    except UnicodeEncodeError:  # lone surrogates: keep them as \\uXXXX escapes
        return json.dumps(value, separators=(",", ":"), allow_nan=False).encode()


def decode(raw: bytes) -> JSONValue:
    """The JSON value in ``raw`` (UTF-8, UTF-16 or UTF-32, as ``json.loads`` detects).

    Raises ``ValueError`` (``json.JSONDecodeError`` or ``UnicodeDecodeError``) when
    ``raw`` is not JSON.
    """
    value: JSONValue
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        value = json.loads(raw)
    return value
