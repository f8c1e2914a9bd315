"""Errors raised by the local runner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmax.results import RunError

__all__ = ["ExecutorError", "GroupContractError"]


class GroupContractError(RunError):
    """``run_group`` raised a contract error (a defect, not an operational failure).

    ``hook`` names the environment method that raised it (``MyEnv.compute_reward``) when
    known; ``log_path`` is the file holding its full traceback, when one was written.
    """

    def __init__(
        self,
        example_index: int,
        example_id: str,
        error: BaseException,
        *,
        hook: str | None = None,
        log_path: Path | None = None,
    ) -> None:
        self.example_index = example_index
        self.example_id = example_id
        self.hook = hook
        self.log_path = log_path
        where = f" in {hook}" if hook else ""
        message = (
            f"example {example_index} ({example_id[:16]}) broke the environment contract"
            f"{where}: {type(error).__name__}: {error}"
        )
        if log_path is not None:
            message += f" (traceback in {log_path})"
        super().__init__(message)
        self.__cause__ = error

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuilt_contract_error,
            (self.example_index, self.example_id, self.__cause__, self.hook, self.log_path),
        )


def _rebuilt_contract_error(
    example_index: int,
    example_id: str,
    error: BaseException,
    hook: str | None,
    log_path: Path | None,
) -> GroupContractError:
    return GroupContractError(example_index, example_id, error, hook=hook, log_path=log_path)


class ExecutorError(RunError):
    """The workers running a run's groups cannot go on (e.g. a Ray worker cannot load the
    bundle, or every worker was lost); the groups already finished are kept."""
