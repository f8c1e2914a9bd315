"""Importing a peer package on first use, with the extra that installs it in the error.

Every source imports its peer (``reasoning_gym``, ``openenv``, ``verifiers``) inside its
constructor through :func:`import_peer`, so ``import benchmax.sources.<peer>`` (and an
entry-point listing) never needs the peer installed.
"""

from __future__ import annotations

import importlib
import re
import warnings
from types import ModuleType

__all__ = ["close_names", "import_peer"]


def import_peer(
    module: str,
    *,
    distribution: str,
    extra: str,
    needed_by: str,
    quiet_syntax_warnings: tuple[str, ...] = (),
) -> ModuleType:
    """``importlib.import_module(module)``, or ``ImportError`` naming what to install.

    A peer that is missing gives ``"<needed_by> needs <distribution>: pip install
    'benchmax[<extra>]'"``; a peer that is installed but fails while importing keeps its
    own error in the message. ``quiet_syntax_warnings`` names third-party packages whose
    ``SyntaxWarning``s (emitted when Python compiles their source, e.g. ``"is" with
    'str' literal``) are silenced during the import: nothing the user can act on; every
    other warning still shows.
    """
    try:
        with warnings.catch_warnings():
            for package in quiet_syntax_warnings:
                # compile-time warnings name the module by its file path, less ".py"
                pattern = rf"(.*[\\/])?{re.escape(package)}([\\/.].*)?$"
                warnings.filterwarnings("ignore", category=SyntaxWarning, module=pattern)
            return importlib.import_module(module)
    except ModuleNotFoundError as error:
        missing = (error.name or "").split(".")[0]
        if missing == module.split(".")[0]:
            raise ImportError(
                f"{needed_by} needs {distribution}: pip install 'benchmax[{extra}]'"
            ) from None
        raise ImportError(
            f"{needed_by}: {distribution} is installed but cannot be imported: {error}"
        ) from error
    except Exception as error:  # a peer's own import-time defect
        raise ImportError(
            f"{needed_by}: {distribution} is installed but cannot be imported: "
            f"{type(error).__name__}: {error}"
        ) from error


def close_names(name: str, known: list[str], limit: int = 3) -> str:
    """`` (did you mean a, b?)`` for the names in ``known`` closest to ``name``, or ``""``."""
    import difflib

    matches = difflib.get_close_matches(name, known, n=limit, cutoff=0.6)
    return f" (did you mean {', '.join(matches)}?)" if matches else ""
