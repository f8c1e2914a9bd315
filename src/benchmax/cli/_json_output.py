"""``--json``: a command's result as one JSON object on stdout.

Every command prints with ``echo_json``, so the documents parse the same way: strict JSON
(a non-finite number, which JSON cannot hold, becomes ``null``), ASCII with every other
character escaped (a control character in model text cannot reach the terminal), indented.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

import click

__all__ = ["echo_json", "strict_json_value"]


def strict_json_value(value: Any) -> Any:
    """``value`` as JSON values: every NaN or infinity (at any depth) replaced by ``None``,
    a path by its string, a dataclass instance by an object of its fields."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            item.name: strict_json_value(getattr(value, item.name))
            for item in dataclasses.fields(value)
        }
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {key: strict_json_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [strict_json_value(item) for item in value]
    return value


def echo_json(document: Mapping[str, Any]) -> None:
    """Print ``document`` as indented, strict, ASCII JSON on stdout."""
    click.echo(json.dumps(strict_json_value(document), indent=2, allow_nan=False))
