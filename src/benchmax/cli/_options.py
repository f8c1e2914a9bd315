"""Command-line options several commands share (``--data``, ``--env-arg``, ``--auth``,
``--api-key-env``), declared once so they parse the same everywhere."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

__all__ = ["api_key_env_option", "auth_option", "data_option", "env_arg_option"]

type _Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def data_option(
    text: str = "Data directory passed to create_dataset as base_dir.",
    *,
    default: Path | None = Path("."),
) -> _Decorator:
    """``--data DIR`` (default ``.``, or ``default``), passed to the command as ``data_dir``."""
    return click.option(
        "--data",
        "data_dir",
        metavar="DIR",
        type=click.Path(path_type=Path),
        default=default,
        show_default=default is not None,
        help=text,
    )


def env_arg_option(text: str) -> _Decorator:
    """``--env-arg KEY=VALUE`` (repeatable), passed as ``env_arg_pairs``."""
    return click.option("--env-arg", "env_arg_pairs", multiple=True, metavar="KEY=VALUE", help=text)


def auth_option(
    text: str = "Bind InjectedAuth(NAME) to the bearer key in variable VAR. Repeatable.",
) -> _Decorator:
    """``--auth NAME=VAR`` (repeatable), passed as ``auth_pairs``."""
    return click.option("--auth", "auth_pairs", multiple=True, metavar="NAME=VAR", help=text)


def api_key_env_option() -> _Decorator:
    """``--api-key-env VAR``: the variable holding the model endpoint's bearer key."""
    return click.option(
        "--api-key-env", metavar="VAR", help="Environment variable holding the bearer key."
    )
