"""Content-addressed, verified copies of Harbor task directories."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

__all__ = ["snapshot_task", "task_content_hash"]


def task_content_hash(task_dir: Path) -> str:
    """Harbor's 64-hex SHA-256 over a task's publishable files and relative paths."""
    from harbor.publisher.packager import Packager

    content_hash: str
    content_hash, _ = Packager.compute_content_hash(task_dir)
    return content_hash


def snapshot_task(source: Path, tasks_dir: Path, expected_hash: str) -> Path:
    """Copy ``source`` to ``tasks_dir/<expected_hash>`` (reusing an existing copy) and verify it."""
    destination = tasks_dir / expected_hash
    if not destination.exists():
        staging = tasks_dir / f".{expected_hash}.{uuid.uuid4().hex}.tmp"
        try:
            shutil.copytree(source, staging)
            try:
                staging.rename(destination)
            except FileExistsError:
                pass  # a concurrent creator won the race; keep its copy
            except OSError:
                # Renaming onto a non-empty directory reports ENOTEMPTY, not EEXIST.
                if not destination.is_dir():
                    raise
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
    actual = task_content_hash(destination)
    if actual != expected_hash:
        raise RuntimeError(
            "Harbor task snapshot content changed while it was being created: "
            f"expected sha256:{expected_hash}, got sha256:{actual}"
        )
    return destination
