"""The run definition: what a results header records about a run and a resume compares.

``run_environment`` and ``benchmax run`` build it with the same function from the same
inputs, so either can resume a file the other started.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from benchmax._rollout_limits import recorded_limits
from benchmax._sampling_args import merged_sampling_args, validated_sampling_args
from benchmax.envs.environment import Environment
from benchmax.results import RunDefinition
from benchmax.runner._config import RunConfig

__all__ = [
    "ENV_SOURCE_KEY",
    "env_sampling_args",
    "env_source_digests",
    "run_definition",
]

ENV_SOURCE_KEY = "env_source"
"""Definition key of the per-module source digests (``{module name: "sha256:<16 hex>"}``)."""


def run_definition(env: Environment[Any, Any], config: RunConfig) -> RunDefinition:
    """The run definition for ``env`` run with ``config``: what its results file's header
    records (with the config's data directory and secrets, and the environment's
    ``reward_weights`` when it sets a mapping of them).

    Keys of ``fields``: ``env`` (``config.env_definition``, else the class path and, when any,
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
    limits = recorded_limits(env)
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
    weights = getattr(env, "reward_weights", None)
    return RunDefinition(
        definition,
        data_dir=config.base_dir,
        reward_weights=weights if isinstance(weights, Mapping) else None,
        secrets=config.secrets(),
    )


def env_source_digests(env_class: type) -> dict[str, str] | None:
    """``{module name: "sha256:<first 16 hex digits>"}``, sorted by name, of the source
    files a bundle of ``env_class`` would carry (see ``benchmax.bundle``'s source capture)
    and of the sibling modules its module imports (``sibling_modules``): the guard a
    resume compares. ``None`` when the class cannot be pickled, so its source cannot be
    told. Bundles' own digests do not change with this."""
    from benchmax.bundle import BundlingError
    from benchmax.bundle._source_capture import local_source_modules

    try:
        captured = local_source_modules(env_class)
    except BundlingError:
        return None
    found = {module.__name__: module for module in captured}
    for module in sibling_modules(env_class):
        found.setdefault(module.__name__, module)
    digests: dict[str, str] = {}
    for name in sorted(found):
        module = found[name]
        location = getattr(module, "__file__", None)
        if not isinstance(location, str):
            continue
        try:
            data = Path(location).read_bytes()
        except OSError:
            continue
        digests[module.__name__] = "sha256:" + hashlib.sha256(data).hexdigest()[:16]
    return digests


def sibling_modules(env_class: type) -> tuple[ModuleType, ...]:
    """The modules beside ``env_class``'s own file that its module imports, directly or
    through one another, sorted by name.

    "Beside" is the directory of the class's file, or for a module inside a package
    (``__init__.py`` files) the directory of its top package, with everything below it. A
    module counts when the class's module (or a counted module) holds it, or holds a class
    or function defined in it, as a global (``import helpers``, ``from helpers import
    bonus``, ``from . import scoring``). Installed packages, the standard library and
    benchmax itself never count, even below that directory (a ``.venv`` inside a project).
    """
    own = sys.modules.get(env_class.__module__)
    own_file = _python_file(own)
    if own is None or own_file is None:
        return ()
    root = own_file.parent
    if own.__name__ != "__main__" and "." in own.__name__:
        while (root.parent / "__init__.py").is_file() and (root / "__init__.py").is_file():
            root = root.parent
    pending, seen = [own], {own.__name__}
    found: dict[str, ModuleType] = {}
    while pending:
        for module in _imported_modules(pending.pop()):
            if module.__name__ in seen:
                continue
            seen.add(module.__name__)
            location = _python_file(module)
            if location is None or not location.is_relative_to(root) or _installed(module):
                continue
            found[module.__name__] = module
            pending.append(module)
    return tuple(found[name] for name in sorted(found))


def _imported_modules(module: ModuleType) -> Iterator[ModuleType]:
    """The modules ``module``'s globals are, or define (classes and functions)."""
    for value in list(vars(module).values()):
        if isinstance(value, ModuleType):
            yield value
            continue
        try:
            name = getattr(value, "__module__", None) if callable(value) else None
        except Exception:  # a global whose attribute lookup itself fails tells nothing
            continue
        if isinstance(name, str) and isinstance(sys.modules.get(name), ModuleType):
            yield sys.modules[name]


def _python_file(module: ModuleType | None) -> Path | None:
    location = getattr(module, "__file__", None)
    if not isinstance(location, str) or not location.endswith(".py"):
        return None
    try:
        return Path(location).resolve()
    except OSError:
        return None


def _installed(module: ModuleType) -> bool:
    """Part of benchmax, the standard library or an installed distribution."""
    name = module.__name__
    if name == "benchmax" or name.startswith("benchmax."):
        return True
    location = _python_file(module)
    if location is None:
        return True
    if {"site-packages", "dist-packages"} & set(location.parts):
        return True
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    return any(location.is_relative_to(Path(prefix).resolve()) for prefix in prefixes)


def env_sampling_args(env: Environment[Any, Any]) -> Mapping[str, Any]:
    """The environment's valid ``sampling_args`` (``{}`` when it has none or they are invalid)."""
    value = getattr(env, "sampling_args", None)
    if not isinstance(value, Mapping):
        return {}
    try:
        return validated_sampling_args(value)
    except (TypeError, ValueError):
        return {}
