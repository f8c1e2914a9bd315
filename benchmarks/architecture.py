"""How benchmax's packages connect: the figures issue 35 tracks, from the source tree.

    uv run python benchmarks/architecture.py [--verbose]

Prints, for ``src/benchmax``:

- ``runner`` private imports in ``training``/``results`` and ``training`` imports in
  ``runner``/``results`` (import statements, wherever they stand: lazy ones count);
- classes still named like the old group records;
- import circles (strongly connected module sets, TYPE_CHECKING and lazy imports included,
  as grimp builds the graph), and those spanning two packages;
- cross-package private import sites: import statements in package P naming a module
  ``benchmax.Q._x`` (Q another subpackage; the root's own private leaves ``benchmax._x``
  are the library's shared internals and do not count);
- ``benchmax.runner``'s public names (``__all__``);
- exception classes defined in ``src`` and how many lack a ``BenchmaxError`` base.

Needs grimp (the dev group's import-linter brings it).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import pkgutil
import sys
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
OLD_GROUP_NAMES = {
    "FinishedGroup",
    "GroupResult",
    "CompletedGroup",
    "CollectedGroup",
    "ResultGroup",
}


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted((SRC / "benchmax").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        yield ".".join(parts), path


def _package(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2])


def _is_package(module: str) -> bool:
    return (SRC / Path(*module.split("."))).is_dir()


def _imports(path: Path, module: str) -> Iterator[tuple[int, str]]:
    """(line, imported module) for every import statement of a file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                if not path.name == "__init__.py":
                    base = base[:-1]
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            yield node.lineno, target
            for alias in node.names:
                yield node.lineno, f"{target}.{alias.name}"


def _private_below_package(target: str) -> bool:
    parts = target.split(".")
    if len(parts) < 3 or parts[0] != "benchmax" or not _is_package(".".join(parts[:2])):
        return False
    return any(p.startswith("_") and not p.startswith("__") for p in parts[2:])


def _existing(target: str) -> bool:
    parts = target.split(".")
    base = SRC / Path(*parts)
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def import_sites(verbose: bool) -> dict[str, int]:
    runner_private = training_up = cross_private = 0
    for module, path in _modules():
        package = _package(module)
        seen: set[tuple[int, str]] = set()
        for line, target in _imports(path, module):
            if not target.startswith("benchmax") or not _existing(target):
                continue
            key = (line, target)
            if key in seen:
                continue
            seen.add(key)
            where = f"{path.relative_to(SRC.parent)}:{line} -> {target}"
            if package in {"benchmax.training", "benchmax.results"} and target.startswith(
                "benchmax.runner._"
            ):
                runner_private += 1
                if verbose:
                    print("  runner private:", where)
            if package in {"benchmax.runner", "benchmax.results"} and (
                target == "benchmax.training" or target.startswith("benchmax.training.")
            ):
                training_up += 1
                if verbose:
                    print("  training import:", where)
            if _package(target) != package and _private_below_package(target):
                cross_private += 1
                if verbose:
                    print("  cross-package private:", where)
    return {
        "runner private imports in training/results": runner_private,
        "training imports in runner/results": training_up,
        "cross-package private import sites": cross_private,
    }


def old_group_classes() -> int:
    count = 0
    for _module, path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        count += sum(
            isinstance(node, ast.ClassDef) and node.name in OLD_GROUP_NAMES
            for node in ast.walk(tree)
        )
    return count


def circles(verbose: bool) -> dict[str, int]:
    import grimp

    graph = grimp.build_graph("benchmax", include_external_packages=False)
    sys.setrecursionlimit(100_000)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for successor in graph.find_modules_directly_imported_by(node):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph.modules):
        if node not in index:
            visit(node)
    spanning = [c for c in found if len({_package(m) for m in c}) > 1]
    if verbose:
        for component in found:
            print(f"  circle of {len(component)}:", ", ".join(component))
    return {"import circles (all)": len(found), "import circles spanning packages": len(spanning)}


def runner_names() -> int:
    sys.path.insert(0, str(SRC))
    runner = importlib.import_module("benchmax.runner")
    return len(runner.__all__)


def exceptions(verbose: bool) -> dict[str, int]:
    sys.path.insert(0, str(SRC))
    importlib.import_module("benchmax")
    try:
        root: type | None = importlib.import_module("benchmax.errors").BenchmaxError
    except (ImportError, AttributeError):
        root = None
    optional = ("harbor", "ray", "torch", "trl", "transformers", "peft", "verifiers")
    classes: dict[str, type] = {}
    for info in pkgutil.walk_packages([str(SRC / "benchmax")], prefix="benchmax."):
        if info.name.endswith(".__main__"):
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError as error:
            if getattr(error, "name", "") and error.name.split(".")[0] in optional:
                continue
            raise
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == info.name
            ):
                classes[f"{info.name}.{name}"] = value
    without = sorted(
        name for name, cls in classes.items() if root is None or not issubclass(cls, root)
    )
    if verbose:
        for name in without:
            print("  no benchmax base:", name)
    return {
        "exception classes": len(classes),
        "exception classes without a benchmax base": len(without),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verbose", action="store_true", help="list every site counted")
    args = parser.parse_args()
    figures: dict[str, int] = {}
    figures.update(import_sites(args.verbose))
    figures["classes named like the old group records"] = old_group_classes()
    figures.update(circles(args.verbose))
    figures["benchmax.runner public names"] = runner_names()
    figures.update(exceptions(args.verbose))
    width = max(map(len, figures))
    for name, value in figures.items():
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    main()
