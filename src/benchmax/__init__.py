"""benchmax: a platform-independent runtime for grouped LLM RL environments."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("benchmax")
except PackageNotFoundError:  # pragma: no cover - running from an uninstalled tree
    __version__ = "0.2.1"

__all__ = ["__version__"]
