"""What a killed ``traces`` run leaves in its output directory, and removing it.

A run spills its rows to ``.traces-<pid>-<random>/`` and writes ``.train.jsonl.tmp-<pid>`` and
``.eval.jsonl.tmp-<pid>`` before moving them into place; a run killed outright (SIGKILL, a
lost machine) cannot clean them up. The next run removes those whose process is gone.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from pathlib import Path

__all__ = ["remove_stale_scratch"]

logger = logging.getLogger("benchmax.datagen")

_SCRATCH = re.compile(r"^\.traces-(?:(\d+)-)?|^\.(?:train|eval)\.jsonl\.tmp-(\d+)$")


def remove_stale_scratch(output: Path) -> None:
    """Remove the spill directories and temporary files of runs into ``output`` whose
    process is gone (killed before it could clean up); a live run's are left alone."""
    try:
        entries = list(output.iterdir())
    except OSError:
        return
    for entry in entries:
        match = _SCRATCH.match(entry.name)
        if match is None:
            continue
        pid = match.group(1) or match.group(2)
        if pid is not None and _process_alive(int(pid)):
            continue
        try:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        except OSError:
            continue  # another run's cleanup got there first, or no permission
        logger.info("traces.stale_scratch_removed path=%s", entry)


def _process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True
