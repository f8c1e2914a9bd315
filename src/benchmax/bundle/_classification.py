"""Module classification by name: project-local source, other projects' source, declared.

A module is *project-local* when one of its source files lies outside site-packages and under a
bundle project root (a directory with a ``pyproject.toml``); it is *external source* when one of
its files lies outside site-packages and outside every project root. Standard-library modules and
``benchmax`` itself are neither, wherever their files are.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import site
import sys
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from types import ModuleType

from packaging.utils import canonicalize_name

from benchmax.bundle._seams import seams

__all__ = [
    "ModuleClassifier",
    "_module_is_project_local",
    "_project_root_for_module",
    "find_module",
    "local_source_paths",
    "source_paths",
]

_EXCLUDED_TOP_LEVEL = frozenset(sys.stdlib_module_names) | {"benchmax"}


def find_module(name: str) -> ModuleType | None:
    """The loaded module ``name``, or a path-only view of it built from its spec (not executed)."""
    loaded = sys.modules.get(name)
    if loaded is not None:
        return loaded
    try:
        spec = importlib.util.find_spec(name)
    except Exception:  # a broken parent package or a malformed name: not findable
        return None
    if spec is None:
        return None
    view = ModuleType(name)
    view.__spec__ = spec
    view.__file__ = spec.origin
    if spec.submodule_search_locations is not None:  # only packages have a __path__
        view.__path__ = spec.submodule_search_locations
    return view


def source_paths(module: object) -> list[Path]:
    """Resolved file and package-directory paths of ``module``, de-duplicated, in order."""
    candidates: list[object] = [getattr(module, "__file__", None)]
    spec = getattr(module, "__spec__", None)
    origin = getattr(spec, "origin", None)
    if origin not in ("built-in", "frozen"):
        candidates.append(origin)
    locations = getattr(spec, "submodule_search_locations", None)
    if locations is not None:
        try:
            candidates.extend(str(location) for location in locations)
        except TypeError:
            pass
    paths: list[Path] = []
    for candidate in candidates:
        if not isinstance(candidate, str):
            continue
        try:
            path = Path(candidate).resolve()
        except (OSError, RuntimeError, ValueError):
            continue
        if path not in paths:
            paths.append(path)
    return paths


def _site_packages() -> tuple[Path, ...]:
    raw = [*site.getsitepackages(), site.getusersitepackages()]
    return _resolve_directories(tuple(raw))


@functools.lru_cache(maxsize=8)
def _resolve_directories(raw: tuple[str, ...]) -> tuple[Path, ...]:
    resolved: list[Path] = []
    for entry in raw:
        try:
            resolved.append(Path(entry).resolve())
        except (OSError, RuntimeError, ValueError):
            continue
    return tuple(resolved)


def _under_any(path: Path, directories: Iterable[Path]) -> bool:
    return any(path.is_relative_to(directory) for directory in directories)


def _nearest_project_root(path: Path) -> Path | None:
    start = path if path.is_dir() else path.parent
    for directory in (start, *start.parents):
        if (directory / "pyproject.toml").is_file():
            return directory
    return None


def local_source_paths(module_name: str) -> list[Path]:
    """Source paths outside site-packages of a findable module that is not stdlib/benchmax."""
    if module_name.partition(".")[0] in _EXCLUDED_TOP_LEVEL:
        return []
    module = find_module(module_name)
    if module is None:
        return []
    site_dirs = _site_packages()
    return [path for path in source_paths(module) if not _under_any(path, site_dirs)]


def _project_root_for_module(module: ModuleType) -> Path | None:
    """The nearest ``pyproject.toml`` directory above the module's first non-site-packages path."""
    site_dirs = _site_packages()
    for path in source_paths(module):
        if _under_any(path, site_dirs):
            continue
        root = _nearest_project_root(path)
        if root is not None:
            return root
    return None


def _module_is_project_local(module_name: str, project_roots: tuple[Path, ...]) -> bool:
    """Whether ``module_name`` has source outside site-packages under one of ``project_roots``."""
    if not project_roots:
        return False
    return any(_under_any(path, project_roots) for path in local_source_paths(module_name))


class ModuleClassifier:
    """Classifies referenced module names for one bundle's project roots and declarations."""

    def __init__(self, project_roots: tuple[Path, ...], declared: Collection[str]) -> None:
        self.project_roots = project_roots
        self._declared = frozenset(declared)
        self._distributions: Mapping[str, list[str]] | None = None

    def is_project_local(self, module_name: str) -> bool:
        """Project-local per the (patchable) ``benchmax.bundle._module_is_project_local``."""
        return bool(seams()._module_is_project_local(module_name, self.project_roots))

    def local_references(self, names: Iterable[str]) -> list[str]:
        """The sorted project-local names among ``names``."""
        return sorted(name for name in set(names) if self.is_project_local(name))

    def is_external_source(self, module_name: str) -> bool:
        """Whether the module has source outside site-packages and outside every project root."""
        return any(
            not _under_any(path, self.project_roots) for path in local_source_paths(module_name)
        )

    def has_declared_distribution(self, module_name: str) -> bool:
        """Whether an installed distribution providing the module is in ``pip_dependencies``."""
        if not self._declared:
            return False
        if self._distributions is None:
            self._distributions = importlib.metadata.packages_distributions()
        providers = self._distributions.get(module_name.partition(".")[0], ())
        return any(canonicalize_name(name) in self._declared for name in providers)

    def is_undeclared_local_source(self, module_name: str) -> bool:
        """Project-local or external source that no declared distribution covers."""
        return (
            self.is_project_local(module_name) or self.is_external_source(module_name)
        ) and not self.has_declared_distribution(module_name)
