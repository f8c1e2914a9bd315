"""Checking the headers an auth object returns before they go on the wire."""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["sendable_auth_headers", "wire_headers"]

# RFC 9110 token characters for names; values without control characters or
# leading/trailing whitespace (the rules h11 enforces when it writes a request).
_HEADER_NAME = re.compile(r"[-!#$%&'*+.^_`|~0-9a-zA-Z]+")
_HEADER_VALUE = re.compile(rb"(?:[^\x00\s]+(?:[ \t]+[^\x00\s]+)*)?")


def sendable_auth_headers[K, V](headers: Mapping[K, V]) -> dict[str, V]:
    """The auth headers as a new dict, refusing any that HTTP cannot carry.

    The HTTP layer would reject them too, but with the offending value (usually a
    credential, e.g. a token read with its trailing newline) in the exception
    text, which then reaches logs. This error names the header only.
    """
    checked: dict[str, V] = {}
    for name, value in dict(headers).items():
        if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
            raise ValueError("model auth returned an invalid header name")
        if isinstance(value, str):
            valid = value.isascii() and _HEADER_VALUE.fullmatch(value.encode()) is not None
        elif isinstance(value, bytes):
            valid = _HEADER_VALUE.fullmatch(value) is not None
        else:
            valid = True  # left to the SDK (e.g. its ``Omit`` marker)
        if not valid:
            raise ValueError(f"model auth returned an invalid value for header {name!r}")
        checked[name] = value
    return checked


def wire_headers[K, V](headers: Mapping[K, V]) -> dict[str, str]:
    """Checked auth headers as text, for an HTTP client that sends ``str`` values.

    ``bytes`` values are sent as their Latin-1 text (the bytes themselves go on the
    wire); a value that is neither is refused, naming only the header.
    """
    sendable: dict[str, str] = {}
    for name, value in sendable_auth_headers(headers).items():
        if isinstance(value, bytes):
            sendable[name] = value.decode("latin-1")
        elif isinstance(value, str):
            sendable[name] = value
        else:
            raise ValueError(f"model auth returned a non-text value for header {name!r}")
    return sendable
