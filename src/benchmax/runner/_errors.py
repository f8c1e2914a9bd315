"""Errors raised by the local runner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmax.errors import BenchmaxError

__all__ = [
    "ExecutorError",
    "GroupContractError",
    "ResultsFileError",
    "ResultsWriteError",
    "ResumeMismatchError",
    "RunError",
]


class RunError(BenchmaxError):
    """A local run could not start or had to stop."""


class ResultsFileError(RunError):
    """The results file cannot be read as a benchmax results file."""


class ResultsWriteError(RunError):
    """The results file could not be written (disk full, permissions, ...).

    A failed group write is cut back first, so the file ends at its last complete group
    and the same run resumes once the problem is fixed.
    """

    def __init__(self, path: Path | str | None, error: OSError, action: str = "write") -> None:
        self.path = None if path is None else str(path)
        self.action = action
        self.errno = error.errno
        self.reason = error.strerror or str(error) or type(error).__name__
        message = f"cannot {action} the results file {path}: {self.reason}"
        if action == "write":
            message += (
                "; the file ends at its last complete group: run the same command again to "
                "resume once the problem is fixed"
            )
        super().__init__(message)

    def __reduce__(self) -> tuple[type[ResultsWriteError], tuple[str | None, OSError, str]]:
        return (type(self), (self.path, OSError(self.errno, self.reason), self.action))


class ResumeMismatchError(RunError):
    """An existing results file was written for a different run definition."""

    def __init__(self, path: str, differences: list[str]) -> None:
        self.path = path
        self.differences = tuple(differences)
        super().__init__(
            f"{path} holds a different run ({'; '.join(differences)}); "
            "use another output file, or resume it anyway with --force (force=True)"
        )

    def __reduce__(self) -> tuple[type[ResumeMismatchError], tuple[str, list[str]]]:
        return (type(self), (self.path, list(self.differences)))


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
