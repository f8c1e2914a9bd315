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

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

from benchmax.errors import BenchmaxError

__all__ = [
    "BundleError",
    "BundlingError",
    "IncompatibleBenchmaxError",
    "IncompatiblePythonError",
    "IncompatibleRuntimeError",
    "cli_wording",
    "worded",
]

_CLI_WORDING: ContextVar[bool] = ContextVar("benchmax_bundle_cli_wording", default=False)


@contextlib.contextmanager
def cli_wording() -> Iterator[None]:
    """Within the block, bundling errors and warnings name ``benchmax bundle``'s options
    (``--local-module NAME``, ``--pip-dependency SPEC``) where they would otherwise name
    ``dump_bundle``'s arguments (``local_modules``, ``pip_dependencies``)."""
    token = _CLI_WORDING.set(True)
    try:
        yield
    finally:
        _CLI_WORDING.reset(token)


def worded(api: str, cli: str) -> str:
    """``cli`` inside ``cli_wording``, else ``api``: one hint in the caller's terms."""
    return cli if _CLI_WORDING.get() else api


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
