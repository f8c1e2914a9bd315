"""A fixed, content-addressed snapshot of a Harbor dataset."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from benchmax._value_checks import is_numeric
from benchmax.envs.dataset import Dataset
from benchmax.envs.harbor._snapshot import snapshot_task, task_content_hash
from benchmax.envs.harbor.dep_check import require_harbor
from benchmax.envs.shared_types import Example

if TYPE_CHECKING:
    from harbor.models.job.config import DatasetConfig

__all__ = ["HarborDataset"]

_EVAL_RATIO_MESSAGE = "eval_ratio must satisfy 0 <= eval_ratio < 1"


def check_eval_ratio(eval_ratio: object) -> float:
    """Return ``eval_ratio`` as a float, or raise the contract ``ValueError``.

    The range check also rejects NaN and infinities (every comparison with NaN is
    false), and unlike ``math.isfinite`` it cannot overflow on a huge integer.
    """
    if not is_numeric(eval_ratio) or not 0 <= eval_ratio < 1:
        raise ValueError(_EVAL_RATIO_MESSAGE)
    return float(eval_ratio)


class HarborDataset(Dataset[Any]):
    """Harbor tasks keyed by content hash, each payload a ``TaskConfig`` of a private copy.

    Example ids depend only on task content, never on where a task lives, and the
    examples are ordered by id.
    """

    @classmethod
    async def create(
        cls,
        config: DatasetConfig,
        *,
        base_dir: Path,
        disable_verification: bool = False,
    ) -> Self:
        """Resolve ``config``, download its tasks and snapshot each under ``base_dir``."""
        require_harbor()
        from harbor.models.job.config import DatasetConfig
        from harbor.models.trial.config import TaskConfig
        from harbor.tasks.client import TaskClient

        if not isinstance(config, DatasetConfig):
            raise TypeError(f"Harbor dataset must be DatasetConfig, got {type(config).__name__}")
        snapshot_root = Path(base_dir).expanduser().resolve()
        downloads_dir = snapshot_root / "downloads"
        tasks_dir = snapshot_root / "tasks"
        downloads_dir.mkdir(parents=True, exist_ok=True)
        tasks_dir.mkdir(parents=True, exist_ok=True)

        resolved = config.model_copy(deep=True, update={"download_dir": downloads_dir})
        task_configs = await resolved.get_task_configs(disable_verification=disable_verification)
        if not task_configs:
            raise ValueError("Harbor dataset resolved to no tasks")
        task_ids = [task_config.get_task_id() for task_config in task_configs]
        downloads = await TaskClient().download_tasks(
            task_ids, overwrite=resolved.overwrite, output_dir=downloads_dir
        )

        examples: list[Example[Any]] = []
        seen: set[str] = set()
        for task_config, download in zip(task_configs, downloads.results, strict=True):
            content_hash = await asyncio.to_thread(task_content_hash, Path(download.path))
            if content_hash in seen:
                raise ValueError(f"Harbor dataset contains duplicate task content: {content_hash}")
            seen.add(content_hash)
            snapshot = await asyncio.to_thread(
                snapshot_task, Path(download.path), tasks_dir, content_hash
            )
            payload = TaskConfig(path=snapshot, source=task_config.source)
            examples.append(Example(id=content_hash, payload=payload))
        examples.sort(key=lambda example: example.id)
        return cls(examples)

    def train_eval_split(self, eval_ratio: float) -> tuple[Self, Self]:
        """Split into ``(train, eval)``; eval takes the lowest ids, train is never empty."""
        ratio = check_eval_ratio(eval_ratio)
        ordered = sorted(self, key=lambda example: example.id)
        count = len(ordered)
        if ratio == 0 or count < 2:
            return type(self)(ordered), type(self)(())
        eval_count = min(count - 1, max(1, math.ceil(count * ratio)))
        return type(self)(ordered[eval_count:]), type(self)(ordered[:eval_count])
