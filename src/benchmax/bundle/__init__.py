"""Environment bundles: an env class plus constructor arguments as a deployable artifact.

``dump_bundle`` pickles the class (capturing its project-local source by value) with canonical
metadata; ``bundle_digest`` identifies the artifact; ``validate_bundle_compatibility`` checks
metadata before anything is unpickled; ``load_bundle`` rebuilds the environment. Bundle files
(``save_bundle`` / ``read_bundle``) are deterministic zips that are verified on read.

Loading a bundle executes its code: load only bundles you trust.
"""

from __future__ import annotations

import importlib.metadata

from benchmax.bundle._artifact import Bundle, BundleMetadata, bundle_digest
from benchmax.bundle._classification import (
    _module_is_project_local as _module_is_project_local,
)
from benchmax.bundle._classification import (
    _project_root_for_module as _project_root_for_module,
)
from benchmax.bundle._compatibility import validate_bundle_compatibility
from benchmax.bundle._dump import dump_bundle
from benchmax.bundle._errors import (
    BundleError,
    BundlingError,
    IncompatibleBenchmaxError,
    IncompatiblePythonError,
    IncompatibleRuntimeError,
)
from benchmax.bundle._files import read_bundle, save_bundle
from benchmax.bundle._load import load_bundle
from benchmax.bundle._source_capture import _get_source as _get_source
from benchmax.bundle._source_capture import unregistered_local_refs

__all__ = [
    "Bundle",
    "BundleError",
    "BundleMetadata",
    "BundlingError",
    "IncompatibleBenchmaxError",
    "IncompatiblePythonError",
    "IncompatibleRuntimeError",
    "bundle_digest",
    "dump_bundle",
    "load_bundle",
    "read_bundle",
    "save_bundle",
    "unregistered_local_refs",
    "validate_bundle_compatibility",
]


def _benchmax_version() -> str:
    """The installed BenchMax distribution version, or ``"unknown"`` (the patchable seam)."""
    try:
        return importlib.metadata.version("benchmax")
    except Exception:
        return "unknown"


# The contract defines these names in ``benchmax.bundle`` itself: pickles (a stored ``Bundle``,
# an exception sent back from a worker) refer to them as ``benchmax.bundle.<name>``, not by the
# private submodule that happens to implement them.
for _name in (*__all__, "_get_source", "_module_is_project_local", "_project_root_for_module"):
    globals()[_name].__module__ = __name__
del _name
