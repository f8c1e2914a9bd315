"""The exception hierarchy of ``benchmax.bundle``::

    BenchmaxError
    └── BundleError                    any error of this package
        ├── BundlingError              building or reading an artifact failed
        └── IncompatibleRuntimeError   an artifact that does not fit this runtime
            ├── IncompatiblePythonError
            └── IncompatibleBenchmaxError

``BundlingError`` and ``IncompatibleRuntimeError`` are deliberately unrelated (neither
subclasses the other); they share only the package base.
"""

from __future__ import annotations

from benchmax.errors import BenchmaxError

__all__ = [
    "BundleError",
    "BundlingError",
    "IncompatibleBenchmaxError",
    "IncompatiblePythonError",
    "IncompatibleRuntimeError",
]


class BundleError(BenchmaxError):
    """Any error of ``benchmax.bundle``: a ``BundlingError`` or an
    ``IncompatibleRuntimeError``."""


class BundlingError(BundleError):
    """Serializing, capturing source for, or reading back a bundle failed."""


class IncompatibleRuntimeError(BundleError):
    """Bundle metadata does not fit the running runtime."""


class IncompatiblePythonError(IncompatibleRuntimeError):
    """The interpreter's major.minor differs from the bundle's ``python_version``."""


class IncompatibleBenchmaxError(IncompatibleRuntimeError):
    """The BenchMax major.minor series differs, or cannot be verified or parsed."""
