"""The base of the command line's own exceptions."""

from __future__ import annotations

from benchmax.errors import BenchmaxError

__all__ = ["CLIError"]


class CLIError(BenchmaxError):
    """Any error of ``benchmax.cli``'s own: a target that cannot be loaded (``TargetError``)
    or failed checks (``ChecksFailed``, a ``click.ClickException``)."""
