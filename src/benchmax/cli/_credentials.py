"""Credentials for a run: bearer keys read from environment variables, injected-auth names."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

import click

from benchmax._reachable import reachable_values
from benchmax._secret_masking import remember
from benchmax.auth import InjectedAuth, ModelAuth, StaticBearerAuth
from benchmax.cli._targets import TargetError

__all__ = [
    "MOCK_KEY",
    "auth_variables",
    "bearer_from_variable",
    "bearer_or_no_auth",
    "injected_auth_names",
]

MOCK_KEY = "benchmax-mock-key"
"""The dummy bearer key every credential gets when the embedded mock model answers."""


def auth_variables(pairs: Sequence[str]) -> dict[str, str]:
    """``NAME=VAR`` pairs of ``--auth`` as ``{name: variable}``."""
    bindings: dict[str, str] = {}
    for pair in pairs:
        name, equals, variable = pair.partition("=")
        if not equals or not name.strip() or not variable.strip():
            raise click.UsageError(f"invalid --auth {pair!r}: expected NAME=ENV_VARIABLE")
        bindings[name.strip()] = variable.strip()
    return bindings


_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def bearer_from_variable(variable: str, option: str) -> StaticBearerAuth:
    """A bearer auth holding the value of ``variable`` (never echoed anywhere).

    An unset ``variable`` that could not be a shell variable's name (``sk-live-...``) is
    most likely the key itself, pasted where its variable's name belongs: the error does
    not repeat it (a terminal, a CI log), it says what the option takes.
    """
    value = os.environ.get(variable)
    if not value:
        if not _VARIABLE_NAME.fullmatch(variable):
            remember(variable)
            raise TargetError(
                f"{option} takes the name of the environment variable holding the key "
                f"(e.g. OPENAI_API_KEY), not the key itself: the {len(variable)} characters "
                "given are not a variable name (not repeated here, in case they are the key)"
            )
        raise TargetError(f"{option} names environment variable {variable}, which is not set")
    remember(value)  # masked in everything this process prints from now on
    return StaticBearerAuth(value)


def bearer_or_no_auth(variable: str | None, option: str) -> ModelAuth:
    """The bearer key in ``variable`` (:func:`bearer_from_variable`), or no credential
    when no variable is named."""
    if variable:
        return bearer_from_variable(variable, option)
    from benchmax.runner import NoModelAuth

    return NoModelAuth()


def injected_auth_names(*roots: Any) -> set[str]:
    """Names of every ``InjectedAuth`` reachable from ``roots`` (attributes, containers)."""
    return {value.name for value in reachable_values(*roots) if isinstance(value, InjectedAuth)}
