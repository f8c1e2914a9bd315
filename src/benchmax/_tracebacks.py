"""Reading a formatted traceback back: the line that says what went wrong."""

from __future__ import annotations

import os
import re
import sysconfig

__all__ = ["exception_line", "failure_summary", "raising_place"]

_HEADER = "Traceback (most recent call last):"
_FRAME = re.compile(r'^  File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)')
_HOOK_NOTE = re.compile(r"^benchmax: raised by (\S+)$", re.MULTILINE)
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_LIBRARY_DIRS = tuple(
    os.path.abspath(path) + os.sep
    for name in ("stdlib", "platstdlib", "purelib", "platlib")
    if (path := sysconfig.get_paths().get(name))
)


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


def raising_place(traceback_text: str) -> str | None:
    """Where the user's code raised, as ``file.py:LINE in function``: the innermost frame of
    the traceback outside benchmax, the standard library and installed packages (the
    innermost frame outside benchmax when every frame is in a library); ``None`` when no
    frame qualifies. Only the file's name is shown."""
    frames = [m for line in traceback_text.splitlines() if (m := _FRAME.match(line))]
    outside = [m for m in frames if not os.path.abspath(m["file"]).startswith(_PACKAGE_DIR)]
    own = [m for m in outside if not os.path.abspath(m["file"]).startswith(_LIBRARY_DIRS)]
    chosen = (own or outside)[-1:]
    if not chosen:
        return None
    frame = chosen[0]
    return f"{os.path.basename(frame['file'])}:{frame['line']} in {frame['function']}"


def failure_summary(traceback_text: str) -> str:
    """``exception_line`` of the traceback, followed by the hook a benchmax note blames and
    where the user's code raised when the traceback says so:
    ``ValueError: boom (raised by MyEnv.compute_reward at my_env.py:12 in compute_reward)``."""
    line = exception_line(traceback_text)
    hook = _HOOK_NOTE.search(traceback_text)
    place = raising_place(traceback_text)
    parts = [f"raised by {hook[1]}"] if hook else []
    if place:
        parts.append(f"at {place}")
    return f"{line} ({' '.join(parts)})" if line and parts else line
