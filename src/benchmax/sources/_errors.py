"""The base of ``benchmax.sources``'s exceptions (all internal so far)."""

from __future__ import annotations

from benchmax.errors import BenchmaxError

__all__ = ["SourceError"]


class SourceError(BenchmaxError):
    """Any error of ``benchmax.sources``' own code (an OpenEnv episode that failed)."""
