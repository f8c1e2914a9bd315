"""Messages in the caller's terms: a hint names ``dump_bundle``'s arguments to a Python
caller and ``benchmax bundle``'s options inside the CLI (bundling, validation, the CLI)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

__all__ = ["cli_wording", "worded"]

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
