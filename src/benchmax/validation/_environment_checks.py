"""Checks of the environment class itself: class, constructor, reward keys, dependencies."""

from __future__ import annotations

import importlib.metadata
import inspect
import sys
from collections.abc import Sequence
from typing import Any

from benchmax._value_checks import is_non_empty_str
from benchmax.envs.base import BaseEnv
from benchmax.envs.environment import Environment
from benchmax.validation._imports import local_source_modules, undeclared_imports
from benchmax.validation._state import Validation, error_text, listed

__all__ = ["check_class", "check_dependencies", "check_reward_keys", "construct"]


def check_class(validation: Validation) -> bool:
    cls: object = validation.env_class  # from untyped callers too: checked here
    if not isinstance(cls, type) or not issubclass(cls, Environment):
        validation.add(
            "environment class",
            "failed",
            f"{cls!r} is not an Environment subclass: subclass benchmax.envs.BaseEnv "
            "(or Environment for a custom loop)",
        )
        return False
    abstract = sorted(getattr(cls, "__abstractmethods__", ()))
    if abstract:
        validation.add(
            "environment class",
            "failed",
            f"{cls.__name__} leaves abstract members unimplemented: {', '.join(abstract)}; "
            "define them on the class",
        )
        return False
    kind = "a BaseEnv" if issubclass(cls, BaseEnv) else "an Environment"
    validation.add("environment class", "passed", f"{cls.__module__}:{cls.__qualname__} is {kind}")
    return True


def construct(validation: Validation) -> Environment[Any, Any] | None:
    args = validation.constructor_args
    try:
        inspect.signature(validation.env_class).bind(**args)
    except TypeError as error:
        validation.add(
            "constructor",
            "failed",
            f"the constructor does not accept these arguments ({error}); pass each "
            "required one as --env-arg KEY=VALUE (constructor_args) and drop unknown ones",
        )
        return None
    except ValueError:
        pass  # no introspectable signature: let the call decide
    try:
        env = validation.env_class(**args)
    except Exception as error:
        validation.add(
            "constructor",
            "failed",
            f"{validation.env_class.__name__}(**{sorted(args)}) raised {error_text(error)}; "
            "fix the arguments or the constructor",
        )
        return None
    shown = ", ".join(sorted(args)) or "no arguments"
    validation.add("constructor", "passed", f"constructed with {shown}")
    return env


def check_reward_keys(validation: Validation, env: Environment[Any, Any]) -> tuple[str, ...] | None:
    advice = (
        "declare the complete, ordered reward shape on the class, e.g. reward_keys = ('correct',)"
    )
    try:
        keys = env.reward_keys
    except Exception as error:
        validation.add("reward_keys", "failed", f"reading reward_keys raised {error_text(error)}")
        return None
    problem = None
    if isinstance(keys, str | bytes) or not isinstance(keys, Sequence):
        problem = f"reward_keys is a {type(keys).__name__}, not a sequence of strings"
    elif not keys:
        problem = "reward_keys is empty"
    elif not all(is_non_empty_str(key) for key in keys):
        problem = "reward_keys holds a value that is not a non-empty string"
    elif len(set(keys)) != len(keys):
        problem = "reward_keys repeats a key"
    if problem is not None:
        validation.add("reward_keys", "failed", f"{problem}: {advice}")
        return None
    validation.add("reward_keys", "passed", ", ".join(keys))
    return tuple(keys)


def check_dependencies(validation: Validation) -> None:
    module = sys.modules.get(validation.env_class.__module__)
    if module is None:
        validation.add("dependencies", "skipped", "the environment's module is not loaded")
        return
    modules = [*local_source_modules(module), *validation.config.local_modules]
    missing = undeclared_imports(modules, validation.config.pip_dependencies)
    if not missing:
        declared = ", ".join(validation.config.pip_dependencies) or "none needed"
        validation.add("dependencies", "passed", f"third-party imports declared ({declared})")
        return
    items = [f"{m.module} imports {m.imported} (distribution {m.distribution})" for m in missing]
    specs = " ".join(f"--pip-dependency '{_suggested(m.distribution)}'" for m in missing)
    validation.add(
        "dependencies",
        "warning",
        f"{listed(items)}: not declared, so it will be missing where the bundle runs; "
        f"declare it with {specs} (pip_dependencies)",
    )


def _suggested(distribution: str) -> str:

    try:
        return f"{distribution}>={importlib.metadata.version(distribution)}"
    except importlib.metadata.PackageNotFoundError:
        return distribution
