"""Reading a results file for a command: its errors as one-line CLI errors."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import click

from benchmax.runner import RunError

__all__ = ["reading"]


@contextlib.contextmanager
def reading(path: Path) -> Iterator[None]:
    """Turn the errors of reading results file ``path`` into one-line CLI errors."""
    try:
        yield
    except (OSError, RunError) as error:  # read_results names the file and the reason
        raise click.ClickException(str(error)) from None
