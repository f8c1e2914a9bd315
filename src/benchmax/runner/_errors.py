"""Errors raised by the local runner."""

from __future__ import annotations

__all__ = [
    "ExecutorError",
    "GroupContractError",
    "ResultsFileError",
    "ResumeMismatchError",
    "RunError",
]


class RunError(Exception):
    """A local run could not start or had to stop."""


class ResultsFileError(RunError):
    """The results file cannot be read as a benchmax results file."""


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
    """``run_group`` raised a contract error (a defect, not an operational failure)."""

    def __init__(self, example_index: int, example_id: str, error: BaseException) -> None:
        self.example_index = example_index
        self.example_id = example_id
        super().__init__(
            f"example {example_index} ({example_id[:16]}) broke the environment contract: "
            f"{type(error).__name__}: {error}"
        )
        self.__cause__ = error


class ExecutorError(RunError):
    """The workers running a run's groups cannot go on (e.g. a Ray worker cannot load the
    bundle, or every worker was lost); the groups already finished are kept."""
