"""Telling user code from the library's: which frame of a stack is "the hook".

A frame is user code when its file is outside benchmax, the standard library and installed
packages (installed scripts such as the ``benchmax`` command count as installed). Frames of
code without a source file (``<frozen importlib._bootstrap>``, ``<string>``) are never user
code, except code cloudpickle carried by value (``<dynamic-code>``: a bundle's, a Ray
worker's). The loop watch blames the innermost such frame of a blocked loop; a deadline
names the line a hook was waiting at when it expired.
"""

from __future__ import annotations

import sys
import sysconfig
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import FrameType

__all__ = ["caller_location", "is_user_code", "outward", "stuck_location", "user_location"]

_BENCHMAX = str(Path(__file__).resolve().parent)
_LIBRARIES = tuple(
    {
        str(Path(sysconfig.get_paths()[name]).resolve())
        for name in ("stdlib", "purelib", "platlib", "scripts")  # scripts: the `benchmax` command
    }
)
_BY_VALUE = "<dynamic-code>"
"""The file name of code cloudpickle carried by value: user code, unlike other generated
code (``<string>``, ``<frozen ...>``)."""


def is_user_code(filename: str) -> bool:
    """Whether code from ``filename`` is the user's (see the module docstring)."""
    if filename.startswith("<"):
        return filename == _BY_VALUE
    try:
        resolved = str(Path(filename).resolve())
    except OSError:
        resolved = filename
    return not resolved.startswith((_BENCHMAX, *_LIBRARIES))


def user_location(frames: Iterable[tuple[FrameType, int]]) -> str | None:
    """``qualname (file:line)`` of the first ``(frame, line)`` whose code is the user's."""
    for frame, line in frames:
        code = frame.f_code
        if is_user_code(code.co_filename):
            return f"{code.co_qualname} ({code.co_filename}:{line})"
    return None


def outward(frame: FrameType | None) -> Iterator[tuple[FrameType, int]]:
    """``frame`` and its callers, innermost first, each at its current line."""
    while frame is not None:
        yield frame, frame.f_lineno
        frame = frame.f_back


def stuck_location(timeout: BaseException) -> str | None:
    """Where the code a deadline interrupted was waiting: the innermost user frame of the
    cancellation behind ``timeout`` (a ``TimeoutError`` from ``asyncio.timeout``)."""
    cancelled = timeout.__cause__ or timeout.__context__
    entries: list[tuple[FrameType, int]] = []
    traceback = cancelled.__traceback__ if cancelled is not None else None
    while traceback is not None:
        entries.append((traceback.tb_frame, traceback.tb_lineno))
        traceback = traceback.tb_next
    return user_location(reversed(entries))


def caller_location() -> str | None:
    """The innermost user frame among the callers of the code calling this function."""
    return user_location(outward(sys._getframe(2)))
