"""benchmax: a platform-independent runtime for grouped LLM RL environments."""

from __future__ import annotations

from benchmax.errors import BenchmaxError

__all__ = ["BenchmaxError", "__version__"]


def __getattr__(name: str) -> str:
    # ``__version__`` is read from the installed metadata on first use and then kept in the
    # module: importlib.metadata (zipfile, email, re, ...) is not imported by ``import
    # benchmax``, since the console script installs its quiet Ctrl-C handling right after
    # this package is imported (benchmax._console_script).
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("benchmax")
    except PackageNotFoundError:  # pragma: no cover - running from an uninstalled tree
        found = "0.2.1"
    globals()["__version__"] = found
    return found
