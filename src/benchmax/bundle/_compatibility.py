"""Runtime compatibility rules: exact Python major.minor, same BenchMax major.minor series."""

from __future__ import annotations

import sys

from benchmax.bundle._artifact import BundleMetadata
from benchmax.bundle._errors import IncompatibleBenchmaxError, IncompatiblePythonError
from benchmax.bundle._seams import seams

__all__ = ["current_python", "runtime_benchmax_version", "validate_bundle_compatibility"]

UNKNOWN_VERSION = "unknown"


def current_python() -> str:
    """The running interpreter as ``"major.minor"``."""
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def runtime_benchmax_version() -> str:
    """Call the patchable seam ``benchmax.bundle._benchmax_version`` as it is right now."""
    version: str = seams()._benchmax_version()
    return version


def validate_bundle_compatibility(metadata: BundleMetadata) -> None:
    """Raise ``IncompatibleRuntimeError`` unless this runtime can load ``metadata``'s bundle.

    Reads only the metadata: Python must match exactly, BenchMax by major.minor.
    """
    if not isinstance(metadata, BundleMetadata):
        raise TypeError("bundle compatibility requires BundleMetadata")
    python = current_python()
    if metadata.python_version != python:
        raise IncompatiblePythonError(
            f"Bundle was packaged with Python {metadata.python_version} "
            f"but this machine runs Python {python}."
        )
    runtime = runtime_benchmax_version()
    bundled = metadata.benchmax_version
    if UNKNOWN_VERSION in (bundled, runtime):
        raise IncompatibleBenchmaxError(
            "Cannot verify BenchMax compatibility because the bundle or runtime version is "
            f"unknown. Install BenchMax as a versioned package (bundle {bundled}, "
            f"runtime {runtime})."
        )
    bundled_series = _series(bundled)
    runtime_series = _series(runtime)
    if bundled_series is None or runtime_series is None:
        raise IncompatibleBenchmaxError(
            f"Cannot parse BenchMax versions (bundle {bundled}, runtime {runtime}); "
            "expected major.minor[.patch]."
        )
    if bundled_series != runtime_series:
        raise IncompatibleBenchmaxError(
            f"Bundle was packaged with BenchMax {bundled} but this runtime uses BenchMax "
            f"{runtime}; major.minor versions must match."
        )


def _series(version: str) -> tuple[int, int] | None:
    parts = version.split(".")
    if len(parts) < 2:
        return None
    try:
        return int(parts[0]), int(parts[1])
    except ValueError:
        return None
