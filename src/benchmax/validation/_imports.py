"""Which third-party distributions an environment's own source imports, and which are declared.

The bundle carries the environment's project source by value, but third-party packages must
be installed where it runs: each must appear in ``pip_dependencies`` (or come with benchmax).
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import site
import sys
import sysconfig
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

__all__ = ["UndeclaredImport", "is_installed", "local_source_modules", "undeclared_imports"]


@dataclass(frozen=True, slots=True)
class UndeclaredImport:
    """``module`` imports ``imported``, which the distribution ``distribution`` provides."""

    module: str
    imported: str
    distribution: str


@cache
def _installed_roots() -> tuple[Path, ...]:
    paths = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    paths.update(site.getsitepackages())
    return tuple(Path(path).resolve() for path in paths)


def _file_of(module: ModuleType) -> Path | None:
    location = getattr(module, "__file__", None)
    return Path(location).resolve() if location else None


def is_installed(module: ModuleType) -> bool:
    """Whether ``module`` was imported from site-packages (an installed distribution)."""
    location = _file_of(module)
    return location is not None and any(location.is_relative_to(r) for r in _installed_roots())


def _is_local(name: str) -> bool:
    """A module that is neither stdlib, benchmax nor installed: the user's own source."""
    top = name.partition(".")[0]
    if top in sys.stdlib_module_names or top == "benchmax":
        return False
    module = sys.modules.get(name)
    if module is None or _file_of(module) is None:
        return False
    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    location = _file_of(module)
    assert location is not None
    return not is_installed(module) and not location.is_relative_to(stdlib)


def _imported_names(module: ModuleType) -> set[str]:
    """Absolute module names imported anywhere in ``module``'s source (relative ones resolved)."""
    location = _file_of(module)
    if location is None or location.suffix != ".py":
        return set()
    try:
        tree = ast.parse(location.read_text(encoding="utf-8"), filename=str(location))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return set()
    package = module.__package__ or ""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if package else ""
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            if target:
                names.add(target)
                names.update(f"{target}.{alias.name}" for alias in node.names)
    return names


def local_source_modules(root: ModuleType) -> list[ModuleType]:
    """``root`` and every user module it imports, directly or through other user modules."""
    found: dict[str, ModuleType] = {root.__name__: root}
    queue = [root]
    while queue:
        module = queue.pop()
        for name in sorted(_imported_names(module)):
            if name not in found and _is_local(name):
                found[name] = sys.modules[name]
                queue.append(sys.modules[name])
    return list(found.values())


@cache
def _benchmax_requirements() -> frozenset[str]:
    """Distributions installing benchmax brings along (its own runtime requirements)."""
    names = {"benchmax"}
    for line in importlib.metadata.requires("benchmax") or ():
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            names.add(canonicalize_name(requirement.name))
    return frozenset(names)


def undeclared_imports(
    modules: Iterable[ModuleType], pip_dependencies: Sequence[str]
) -> list[UndeclaredImport]:
    """Third-party imports of ``modules`` whose distribution is not declared (nor benchmax's)."""
    declared: set[str] = {canonicalize_name(Requirement(spec).name) for spec in pip_dependencies}
    declared |= _benchmax_requirements()
    providers = importlib.metadata.packages_distributions()
    problems: dict[tuple[str, str], UndeclaredImport] = {}
    for module in modules:
        for name in sorted(_imported_names(module)):
            top = name.partition(".")[0]
            if top in sys.stdlib_module_names or top in ("benchmax", "__future__"):
                continue
            if (module.__name__, top) in problems or _is_local(top) or _is_local(name):
                continue
            distributions = [canonicalize_name(d) for d in providers.get(top, ())]
            if not distributions or any(d in declared for d in distributions):
                continue
            problems[(module.__name__, top)] = UndeclaredImport(
                module=module.__name__, imported=top, distribution=distributions[0]
            )
    return list(problems.values())
