"""Errors of a run and of its record: the results file cannot be read, written or resumed."""

from __future__ import annotations

from pathlib import Path

from benchmax.errors import BenchmaxError

__all__ = ["ResultsFileError", "ResultsWriteError", "ResumeMismatchError", "RunError"]


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
    """An existing results file was written for a different run definition.

    ``scoring_failures`` counts the file's rollouts whose scoring failed (``reward_error``
    and the like); the message then points to ``benchmax rescore``, which scores them again
    (a ``--force`` resume would keep them as they are)."""

    def __init__(self, path: str, differences: list[str], scoring_failures: int = 0) -> None:
        self.path = path
        self.differences = tuple(differences)
        self.scoring_failures = scoring_failures
        message = (
            f"{path} holds a different run ({'; '.join(differences)}); "
            "use another output file, or resume it anyway with --force (force=True)"
        )
        if scoring_failures:
            message += (
                f"; its {scoring_failures} rollout(s) whose scoring failed (reward_error,"
                " reward_timeout, judge_error, group_reward_error) stay failed under --force:"
                f" 'benchmax rescore {path}' scores them again with the current code"
            )
        super().__init__(message)

    def __reduce__(self) -> tuple[type[ResumeMismatchError], tuple[str, list[str], int]]:
        return (type(self), (self.path, list(self.differences), self.scoring_failures))
