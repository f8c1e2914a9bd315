"""The run definition: what a results header records about a run and a resume compares.

``run_environment`` and ``benchmax run`` build it with the same function from the same
inputs, so either can resume a file the other started.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchmax.envs._sampling_args import merged_sampling_args, validated_sampling_args
from benchmax.envs.environment import Environment
from benchmax.runner._config import RunConfig

__all__ = [
    "ENV_SOURCE_KEY",
    "LIMIT_NAMES",
    "env_sampling_args",
    "env_source_digests",
    "run_definition",
]

ENV_SOURCE_KEY = "env_source"
"""Definition key of the per-module source digests (``{module name: "sha256:<16 hex>"}``)."""

LIMIT_NAMES = (
    "max_turns",
    "max_tool_calls",
    "model_timeout",
    "model_retries",
    "tool_timeout",
    "rollout_timeout",
    "reward_timeout",
)
"""Environment attributes recorded as ``limits`` (BaseEnv's; they change outcomes)."""


def run_definition(env: Environment[Any, Any], config: RunConfig) -> dict[str, Any]:
    """The run definition for ``env`` run with ``config``.

    Keys: ``env`` (``config.env_definition``, else the class path and, when any,
    ``constructor_args``), ``env_source`` (unless the environment comes from a bundle),
    ``split``, ``model``, ``base_url``, ``group_size``, ``max_examples``, ``limits`` (only
    for environments with BaseEnv limits), ``sampling_args`` (only when some are set: the
    environment's merged with the run's), ``seed`` (only when set), ``tokens`` (``true``,
    only when the run records exact tokens) and ``config.definition_extras``.
    """
    if config.env_definition is not None:
        env_part = dict(config.env_definition)
    else:
        cls = type(env)
        env_part = {"class": f"{cls.__module__}:{cls.__qualname__}"}
        if config.constructor_args:
            env_part["constructor_args"] = dict(config.constructor_args)
    definition: dict[str, Any] = {"env": env_part}
    if "bundle_digest" not in env_part:
        definition[ENV_SOURCE_KEY] = env_source_digests(type(env))
    definition.update(
        split=config.split,
        model=config.model,
        base_url=config.public_base_url,
        group_size=config.group_size,
        max_examples=config.max_examples,
    )
    limits = _limits(env)
    if limits:
        definition["limits"] = limits
    sampling = merged_sampling_args(env_sampling_args(env), config.sampling_args)
    if sampling:
        definition["sampling_args"] = sampling
    if config.seed is not None:
        definition["seed"] = config.seed
    if config.tokens:
        definition["tokens"] = True
    definition.update(config.definition_extras)
    return definition


def env_source_digests(env_class: type) -> dict[str, str] | None:
    """``{module name: "sha256:<first 16 hex digits>"}`` of the source files a bundle of
    ``env_class`` would carry (see ``benchmax.bundle``'s source capture); ``None`` when the
    class cannot be pickled, so its source cannot be told."""
    from benchmax.bundle import BundlingError
    from benchmax.bundle._source_capture import local_source_modules

    try:
        modules = local_source_modules(env_class)
    except BundlingError:
        return None
    digests: dict[str, str] = {}
    for module in modules:
        location = getattr(module, "__file__", None)
        if not isinstance(location, str):
            continue
        try:
            data = Path(location).read_bytes()
        except OSError:
            continue
        digests[module.__name__] = "sha256:" + hashlib.sha256(data).hexdigest()[:16]
    return digests


def _limits(env: Environment[Any, Any]) -> dict[str, Any]:
    limits: dict[str, Any] = {}
    for name in LIMIT_NAMES:
        value = getattr(env, name, _MISSING)
        if value is None or (
            isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        ):
            limits[name] = value
    return limits


def env_sampling_args(env: Environment[Any, Any]) -> Mapping[str, Any]:
    """The environment's valid ``sampling_args`` (``{}`` when it has none or they are invalid)."""
    value = getattr(env, "sampling_args", None)
    if not isinstance(value, Mapping):
        return {}
    try:
        return validated_sampling_args(value)
    except (TypeError, ValueError):
        return {}


_MISSING = object()
