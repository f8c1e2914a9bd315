"""Replacing a whole file safely: the one rule every writer of a finished file follows.

The new content goes to a temporary file created exclusively (a unique name, ``O_EXCL``,
never following a link planted at that name) in the target's own directory, and is then
moved over the target with ``os.replace``. A target that is a symbolic link is written
*through*: the link stays, and the file it points to is replaced (so a results path that is
a link to another disk keeps being one). The file keeps the mode it had, or gets the
process's default mode when new.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

__all__ = ["replace_file"]


def replace_file(path: str | os.PathLike[str], chunks: bytes | Iterable[bytes]) -> Path:
    """Replace the file at ``path`` (or the file a link there points to) with ``chunks``.

    Returns the path actually replaced. Raises ``OSError`` when the directory cannot hold
    the temporary file or the move fails; the target is then unchanged and no temporary
    file is left behind.
    """
    target = Path(os.path.realpath(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    mode = _mode_for(target)
    descriptor, temporary = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=".tmp", dir=target.parent
    )
    try:
        with os.fdopen(descriptor, "wb") as handle:
            for chunk in [chunks] if isinstance(chunks, bytes) else chunks:
                handle.write(chunk)
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise
    return target


def _mode_for(target: Path) -> int:
    try:
        return target.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
