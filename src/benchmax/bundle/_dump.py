"""``dump_bundle``: validate inputs, capture source, record metadata."""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

from benchmax._cli_wording import worded
from benchmax.bundle._artifact import Bundle, BundleMetadata
from benchmax.bundle._classification import ModuleClassifier
from benchmax.bundle._compatibility import (
    UNKNOWN_VERSION,
    current_python,
    runtime_benchmax_version,
)
from benchmax.bundle._dependencies import declared_distributions, normalize_dependencies
from benchmax.bundle._errors import BundlingError
from benchmax.bundle._seams import seams
from benchmax.bundle._source_capture import capture_env_class, project_roots
from benchmax.envs.environment import Environment
from benchmax.envs.shared_types import RolloutAttempt

__all__ = ["dump_bundle"]

logger = logging.getLogger("benchmax.bundle")


def dump_bundle(
    env_class: type[Environment[Any, RolloutAttempt]],
    *,
    constructor_args: Mapping[str, object] | None = None,
    pip_dependencies: Sequence[str] | None = None,
    local_modules: list[ModuleType] | None = None,
    env_class_source: str | None = None,
    auto_local_modules: bool = True,
) -> Bundle:
    """Pickle ``env_class`` and its constructor arguments into a deployable ``Bundle``.

    Modules of the env class's own project (nearest ``pyproject.toml``) are captured by value
    automatically; other local source must be passed in ``local_modules`` or declared as an
    installed distribution in ``pip_dependencies``. Raises ``BundlingError`` on any problem.
    """
    _check_interpreter()
    _check_env_class(env_class)
    constructor_args = constructor_args or {}
    try:
        dependencies = normalize_dependencies(() if pip_dependencies is None else pip_dependencies)
    except (TypeError, ValueError) as exc:
        what = worded("pip_dependencies", "--pip-dependency")
        raise BundlingError(f"Invalid {what}: {exc}") from exc
    benchmax_version = runtime_benchmax_version()
    if benchmax_version == UNKNOWN_VERSION:
        raise BundlingError(
            "Cannot determine the BenchMax package version; install BenchMax as a versioned "
            "package (e.g. `pip install -e .` or a wheel) so bundles can be checked for "
            "compatibility."
        )
    local_modules = local_modules or []
    classifier = ModuleClassifier(
        project_roots(env_class, local_modules), declared_distributions(dependencies)
    )
    pickled = capture_env_class(
        env_class,
        constructor_args,
        local_modules,
        classifier,
        auto_local_modules=auto_local_modules,
    )
    if env_class_source is None:
        env_class_source = seams()._get_source(env_class)
    metadata = BundleMetadata(
        pip_dependencies=dependencies,
        python_version=current_python(),
        benchmax_version=benchmax_version,
        env_class_source=env_class_source,
    )
    logger.info(
        "[bundle] dumped %s: %.1f KB pickled, %d pip deps",
        env_class.__name__,
        len(pickled) / 1024,
        len(dependencies),
    )
    return Bundle(pickled=pickled, metadata=metadata)


def _check_interpreter() -> None:
    major, minor, micro = sys.version_info[:3]
    if (major, minor) == (3, 13):
        # 3.13 changed how pathlib.Path pickles, which breaks cross-version loading.
        raise BundlingError(
            f"Python {major}.{minor}.{micro} is unsupported. Use Python 3.12 or >= 3.14."
        )


def _check_env_class(env_class: object) -> None:
    if not isinstance(env_class, type) or not issubclass(env_class, Environment):
        raise BundlingError(f"{env_class!r} does not implement Environment.")
    if env_class is Environment:
        raise BundlingError(
            "Cannot bundle the Environment protocol; provide a concrete implementation."
        )
    abstract = sorted(getattr(env_class, "__abstractmethods__", ()))
    if abstract:
        raise BundlingError(
            f"{env_class.__name__} has unimplemented abstract methods: {', '.join(abstract)}"
        )
