"""Untrusted text (bundle metadata and source, model and tool text, error messages) made
safe to print on a terminal: control characters are shown escaped, never sent raw.

A bundle, a model reply or an environment's exception can carry ANSI escape sequences
(``ESC [ ... m``, ``ESC ] 8 ; ...`` hyperlinks, cursor movement, title changes), carriage
returns that overprint a line, or bidirectional overrides that make source read differently
from how it runs ("Trojan Source"). Every CLI output of such text goes through
``terminal_safe``.
"""

from __future__ import annotations

import re

__all__ = ["terminal_safe"]

# C0 controls but tab and newline, DEL, C1 controls, the bidirectional formatting
# characters, the line/paragraph separators and lone surrogates.
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
    "\ud800-\udfff]"
)
_UNSAFE_OR_NEWLINE = re.compile(f"\n|{_UNSAFE.pattern}")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def terminal_safe(text: str, *, keep_newlines: bool = True) -> str:
    """``text`` with every terminal control character written as an escape (``\\x1b``,
    ``\\u202e``); tabs stay, and newlines stay unless ``keep_newlines`` is false."""
    pattern = _UNSAFE if keep_newlines else _UNSAFE_OR_NEWLINE
    return pattern.sub(_escaped, text)
