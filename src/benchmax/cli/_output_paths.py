"""Default output paths that never name an existing file (``run``, ``rescore``)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["free_path"]


def free_path(directory: Path, stem: str, suffix: str) -> Path:
    """``directory/stem+suffix``, or ``stem-2``, ``stem-3``... when that already exists."""
    path = directory / f"{stem}{suffix}"
    number = 2
    while path.exists():
        path = directory / f"{stem}-{number}{suffix}"
        number += 1
    return path
