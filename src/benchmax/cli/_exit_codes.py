"""The exit statuses of every ``benchmax`` command, and which command can end with which.

One status per kind of ending, the same in every command (the table in ``docs/cli.md`` is
checked against ``COMMAND_EXIT_CODES`` by a test):

- ``0`` the command did what it was asked;
- ``1`` it ran to the end but what it checked failed (``validate`` found a failing check,
  ``run`` saw every rollout fail, ``generate-qa`` had model requests fail, ...);
- ``2`` the command line is wrong (an unknown option, a bad value, options that exclude
  each other): nothing ran;
- ``3`` the configuration or an endpoint is wrong (a target that does not import, a missing
  data file or results file, an unreachable or refusing endpoint, an unreadable bundle);
- ``4`` ``run`` finished, but more of its rollouts failed operationally than
  ``--fail-on-error`` tolerates: its rewards are not trustworthy; or
  ``train`` stopped because no step could learn (every rollout of several steps
  failed operationally): its weights are not trustworthy;
- ``130`` interrupted by Ctrl-C (SIGINT), ``143`` stopped by SIGTERM; what finished is kept.

Servers (``capture``, ``mock-serve``, ``serve``, ``serve-model``) run until stopped: a
signal ends them with ``0``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

import click

from benchmax.cli._errors import CLIError

__all__ = [
    "COMMAND_EXIT_CODES",
    "SERVERS",
    "ChecksFailed",
    "DetailedError",
    "ExitCode",
    "Untrustworthy",
    "exit_code_of",
]


class ExitCode(enum.IntEnum):
    """A ``benchmax`` exit status."""

    SUCCESS = 0
    CHECKS_FAILED = 1
    USAGE_ERROR = 2
    CONFIGURATION_ERROR = 3
    UNTRUSTWORTHY = 4
    INTERRUPTED = 130
    TERMINATED = 143


class ChecksFailed(click.ClickException, CLIError):
    """The command finished, but what it checked failed: ``Error: MESSAGE``, exit 1.

    ``reported=True`` when what the command already printed says why (a ``--json``
    document naming the failed checks): the status is 1 and no ``Error:`` line follows,
    so stdout and stderr hold only the document."""

    exit_code = ExitCode.CHECKS_FAILED.value

    def __init__(self, message: str, *, reported: bool = False) -> None:
        super().__init__(message)
        self.reported = reported


class Untrustworthy(click.ClickException, CLIError):
    """The run finished, but too many of its rollouts failed operationally to trust its
    rewards: ``Error: untrustworthy: ...`` as the last line, exit 4."""

    exit_code = ExitCode.UNTRUSTWORTHY.value


class DetailedError(click.ClickException, CLIError):
    """An error whose ``Error:`` line is short, followed by indented ``detail`` lines (an
    example, what to do); exit 3 like any configuration or endpoint error."""

    def __init__(self, message: str, detail: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.detail = detail


def exit_code_of(error: click.ClickException) -> ExitCode:
    """The exit status of a command that raised ``error``: 2 for a usage error, 1 for
    ``ChecksFailed``, 4 for ``Untrustworthy``, 3 for every other error (a configuration or
    endpoint error)."""
    if isinstance(error, click.UsageError):
        return ExitCode.USAGE_ERROR
    if isinstance(error, Untrustworthy):
        return ExitCode.UNTRUSTWORTHY
    if isinstance(error, ChecksFailed):
        return ExitCode.CHECKS_FAILED
    return ExitCode.CONFIGURATION_ERROR


_FINISHING = frozenset({ExitCode.SUCCESS, ExitCode.USAGE_ERROR, ExitCode.CONFIGURATION_ERROR})
_CHECKING = _FINISHING | {ExitCode.CHECKS_FAILED}

COMMAND_EXIT_CODES: Mapping[str, frozenset[ExitCode]] = {
    "bundle": _FINISHING,
    "capture": _FINISHING,
    "compare": _FINISHING,
    "generate-qa": _CHECKING,
    "init": _FINISHING,
    "inspect": _CHECKING,
    "mock-serve": _FINISHING,
    "rescore": _FINISHING,
    "run": _CHECKING | {ExitCode.UNTRUSTWORTHY},
    "serve": _FINISHING,
    "serve-model": _FINISHING,
    "show": _FINISHING,
    "traces": _FINISHING,
    "train": _FINISHING | {ExitCode.UNTRUSTWORTHY},
    "validate": _CHECKING,
    "view": _FINISHING,
}
"""The statuses each command ends with when it is not interrupted."""

SERVERS = frozenset({"capture", "mock-serve", "serve", "serve-model"})
"""The commands that run until stopped: Ctrl-C or SIGTERM ends them with ``0``. Every
other command exits ``130`` after Ctrl-C and ``143`` after SIGTERM."""
