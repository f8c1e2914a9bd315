"""Access to the documented patch seams, which live on the ``benchmax.bundle`` package.

Tests and platforms replace ``benchmax.bundle._benchmax_version`` (and the other documented
private names) with ``monkeypatch``; internal code therefore looks them up on the package
object at call time instead of holding its own reference.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["seams"]


def seams() -> ModuleType:
    """The ``benchmax.bundle`` package object, as it is right now."""
    return importlib.import_module("benchmax.bundle")
