"""benchmax: a platform-independent runtime for grouped LLM RL environments."""

from __future__ import annotations

import functools

__all__ = ["__version__"]


@functools.cache
def _version() -> str:
    # importlib.metadata (zipfile, email, re, ...) is imported on first use, not by
    # ``import benchmax``: the console script installs its quiet Ctrl-C handling right
    # after this package is imported (benchmax._console_script).
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("benchmax")
    except PackageNotFoundError:  # pragma: no cover - running from an uninstalled tree
        return "0.2.1"


def __getattr__(name: str) -> str:
    if name == "__version__":
        return _version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
