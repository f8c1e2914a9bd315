"""Lazy probe for the optional Harbor dependency."""

from __future__ import annotations

import importlib

_MISSING_HARBOR = (
    "HarborEnv requires the optional Harbor dependency; "
    "install `benchmax[harbor]` plus the selected sandbox provider extra"
)


def require_harbor() -> None:
    """Import ``harbor`` or raise a friendly ``ImportError`` when it is not installed.

    A missing dependency *of* Harbor (Harbor installed but broken) re-raises the
    interpreter's original error unchanged.
    """
    try:
        importlib.import_module("harbor")
    except ModuleNotFoundError as error:
        if error.name != "harbor":
            raise
        raise ImportError(_MISSING_HARBOR) from None
