"""The exception hierarchy of ``benchmax.bundle``.

``BundlingError`` (building or reading an artifact) and ``IncompatibleRuntimeError`` (an
artifact that does not fit this runtime) are deliberately unrelated.
"""

from __future__ import annotations

__all__ = [
    "BundlingError",
    "IncompatibleBenchmaxError",
    "IncompatiblePythonError",
    "IncompatibleRuntimeError",
]


class BundlingError(Exception):
    """Serializing, capturing source for, or reading back a bundle failed."""


class IncompatibleRuntimeError(Exception):
    """Bundle metadata does not fit the running runtime."""


class IncompatiblePythonError(IncompatibleRuntimeError):
    """The interpreter's major.minor differs from the bundle's ``python_version``."""


class IncompatibleBenchmaxError(IncompatibleRuntimeError):
    """The BenchMax major.minor series differs, or cannot be verified or parsed."""
