"""Source capture: pickle an env class with its project-local modules by value.

cloudpickle's by-value registry is process-global, so every "register, dump, unregister"
sequence runs under one process-wide lock and restores the registry before returning, whatever
happens. After pickling, references that a remote interpreter could not satisfy are refused:
uncaptured project-local modules, source from other local projects, and imports of local source
executed later inside function bodies.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any

import cloudpickle

from benchmax._cli_wording import worded
from benchmax.bundle._classification import ModuleClassifier, find_module, local_source_paths
from benchmax.bundle._delayed_imports import delayed_import_names
from benchmax.bundle._errors import BundlingError
from benchmax.bundle._references import referenced_modules
from benchmax.bundle._seams import seams
from benchmax.envs.environment import Environment
from benchmax.envs.shared_types import RolloutAttempt

__all__ = [
    "_get_source",
    "capture_env_class",
    "local_source_modules",
    "project_roots",
    "unregistered_local_refs",
]

logger = logging.getLogger("benchmax.bundle")

_BUNDLE_LOCK = threading.Lock()
_MAX_CAPTURE_ROUNDS = 10


def _get_source(env_class: type[Environment[Any, RolloutAttempt]]) -> str | None:
    """``inspect.getsource(env_class)``, or ``None`` (logged at DEBUG) when unavailable."""
    try:
        return inspect.getsource(env_class)
    except (OSError, TypeError) as exc:
        name = getattr(env_class, "__name__", env_class)
        logger.debug("[bundle] no source for %s: %s", name, exc)
        return None


def project_roots(env_class: type, local_modules: Sequence[object]) -> tuple[Path, ...]:
    """Project roots of the env class's module and of every explicit local module."""
    candidates = [_loaded_module(env_class.__module__), *local_modules]
    roots: set[Path] = set()
    for module in candidates:
        if not isinstance(module, ModuleType):
            continue  # absent (e.g. an exec-generated class) or rejected later
        root = seams()._project_root_for_module(module)
        if root is not None:
            roots.add(root)
    return tuple(sorted(roots))


def _loaded_module(name: object) -> ModuleType | None:
    return sys.modules.get(name) if isinstance(name, str) else None


@dataclass(frozen=True)
class _Capture:
    pickled: bytes
    references: frozenset[str]
    explicit_names: tuple[str, ...]
    captured_names: frozenset[str]


def capture_env_class(
    env_class: type,
    constructor_args: Mapping[str, object],
    local_modules: Sequence[object],
    classifier: ModuleClassifier,
    *,
    auto_local_modules: bool,
) -> bytes:
    """Pickle ``(env_class, constructor_args)`` with local source by value, then check it."""
    capture = _serialize_with_local_source(
        env_class, constructor_args, local_modules, classifier, auto_local_modules
    )
    name = env_class.__name__
    missing = classifier.local_references(capture.references)
    if missing:
        message = worded(
            f"{name}: missing local_modules=[{', '.join(missing)}]",
            f"{name}: its source imports local modules that are not bundled: "
            f"{', '.join(missing)}; add "
            + " ".join(f"--local-module {module}" for module in missing),
        )
        if capture.explicit_names:
            message += f" (already registered: [{', '.join(sorted(capture.explicit_names))}])"
        raise BundlingError(message)
    outside = sorted(
        module_name
        for module_name in capture.references
        if classifier.is_external_source(module_name)
        and not classifier.has_declared_distribution(module_name)
    )
    if outside:
        raise BundlingError(
            f"{name}: referenced source outside the environment project: {', '.join(outside)}. "
            + worded(
                "Pass the module object in local_modules to bundle it, or declare its "
                "installed distribution in pip_dependencies to keep it as a remote dependency.",
                "Bundle it with --local-module NAME, or declare its installed distribution "
                "with --pip-dependency SPEC to keep it as a remote dependency.",
            )
        )
    delayed = sorted(
        module_name
        for module_name in delayed_import_names(env_class, capture.captured_names)
        if classifier.is_undeclared_local_source(module_name)
    )
    if delayed:
        raise BundlingError(
            f"{name}: delayed import of local source cannot be captured safely: "
            f"{', '.join(delayed)}. Move the import to module scope, or install the module "
            + worded(
                "remotely and declare its distribution in pip_dependencies; passing it in "
                "local_modules does not satisfy an import statement executed later.",
                "remotely and declare its distribution with --pip-dependency SPEC; naming it "
                "with --local-module does not satisfy an import statement executed later.",
            )
        )
    return capture.pickled


def _serialize_with_local_source(
    env_class: type,
    constructor_args: Mapping[str, object],
    local_modules: Sequence[object],
    classifier: ModuleClassifier,
    auto_local_modules: bool,
    *,
    announce: bool = True,
) -> _Capture:
    captured: list[str] = []
    with _BUNDLE_LOCK, _ByValueRegistration() as registration:
        for module in local_modules:
            if not isinstance(module, ModuleType):
                raise BundlingError(
                    "local_modules must contain module objects, "
                    f"got {type(module).__name__}: {module!r}"
                )
            registration.register(module)
            captured.append(module.__name__)
        explicit = tuple(captured)
        pickled = _serialize(env_class, constructor_args)
        references = referenced_modules(pickled)
        if auto_local_modules:
            seen = set(captured)
            for _ in range(_MAX_CAPTURE_ROUNDS):
                pending = [n for n in classifier.local_references(references) if n not in seen]
                if not pending:
                    break
                seen.update(pending)
                imported = _import_all(pending)
                if not imported:
                    break
                if announce:
                    logger.warning(
                        "[bundle] %s: auto-bundling local module(s): %s (%s)",
                        env_class.__name__,
                        ", ".join(sorted(module.__name__ for module in imported)),
                        worded(
                            "pass them in local_modules to silence this warning",
                            "name them with --local-module to silence this warning",
                        ),
                    )
                for module in imported:
                    registration.register(module)
                    captured.append(module.__name__)
                pickled = _serialize(env_class, constructor_args)
                references = referenced_modules(pickled)
    return _Capture(pickled, frozenset(references), explicit, frozenset(captured))


def _import_all(names: list[str]) -> list[ModuleType]:
    modules: list[ModuleType] = []
    for name in names:
        try:
            modules.append(importlib.import_module(name))
        except Exception:  # falls through to the "missing local_modules" check
            continue
    return modules


def _serialize(env_class: type, constructor_args: Mapping[str, object]) -> bytes:
    try:
        payload: bytes = cloudpickle.dumps((env_class, constructor_args))
        return payload
    except Exception as exc:
        raise BundlingError(f"Failed to serialize {env_class.__name__}: {exc}") from exc


class _ByValueRegistration:
    """Registers modules by value; on exit restores cloudpickle's registry as it was."""

    def __init__(self) -> None:
        self._before: set[str] = set()
        self._registered: list[ModuleType] = []

    def __enter__(self) -> _ByValueRegistration:
        self._before = set(cloudpickle.list_registry_pickle_by_value())
        return self

    def register(self, module: ModuleType) -> None:
        cloudpickle.register_pickle_by_value(module)
        self._registered.append(module)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for module in reversed(self._registered):
            if module.__name__ in self._before:
                continue
            try:
                cloudpickle.unregister_pickle_by_value(module)
            except Exception:  # already unregistered (a duplicate entry)
                continue


def local_source_modules(
    env_class: type, local_modules: Sequence[ModuleType] = ()
) -> tuple[ModuleType, ...]:
    """The modules whose source a bundle of ``env_class`` would carry, sorted by name.

    That is ``local_modules``, the modules auto-capture finds (project-local modules the
    pickled class refers to, found exactly as ``dump_bundle`` finds them), and the env
    class's own module when its file is local source (outside site-packages, not the
    standard library or benchmax) even if nothing refers to it by name (``__main__``, a
    single file outside any project). Nothing is logged; raises ``BundlingError`` when the
    class cannot be serialized.
    """
    classifier = ModuleClassifier(project_roots(env_class, local_modules), ())
    capture = _serialize_with_local_source(
        env_class, {}, local_modules, classifier, True, announce=False
    )
    modules = {name: sys.modules[name] for name in capture.captured_names if name in sys.modules}
    own = _loaded_module(env_class.__module__)
    if own is not None and local_source_paths(own.__name__):
        modules.setdefault(own.__name__, own)
    return tuple(modules[name] for name in sorted(modules))


def unregistered_local_refs(pickled: bytes) -> list[str]:
    """Project-local modules that ``pickled`` references by name (so a remote load would fail).

    Candidate project roots are inferred from the referenced modules themselves.
    """
    if not isinstance(pickled, bytes | bytearray | memoryview):
        raise TypeError("unregistered_local_refs requires pickle bytes")
    references = referenced_modules(bytes(pickled))
    package = seams()
    roots: set[Path] = set()
    for name in references:
        module = find_module(name)
        if module is None:
            continue
        root = package._project_root_for_module(module)
        if root is not None:
            roots.add(root)
    found_roots = tuple(sorted(roots))
    return sorted(
        name for name in references if package._module_is_project_local(name, found_roots)
    )
