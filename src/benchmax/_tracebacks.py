"""Reading a formatted traceback back: the line that says what went wrong."""

from __future__ import annotations

__all__ = ["exception_line"]

_HEADER = "Traceback (most recent call last):"


def exception_line(traceback_text: str) -> str:
    """The ``Type: message`` line of a formatted traceback (``traceback.format_exception``
    text): the first unindented line after its last frame. Neither a note added to the
    exception (``benchmax: raised by ...``) nor the continuation lines of a multi-line
    message (pydantic's ``For further information visit ...``) stand for it. Text that
    is no traceback gives its first line; empty text gives ``""``."""
    lines = [line for line in traceback_text.strip().splitlines() if line.strip()]
    frames = [i for i, line in enumerate(lines) if line.startswith("  File ")]
    after = lines[frames[-1] + 1 :] if frames else lines
    header = [line for line in after if not line[:1].isspace() and line != _HEADER]
    return header[0] if header else (lines[-1].strip() if lines else "")
