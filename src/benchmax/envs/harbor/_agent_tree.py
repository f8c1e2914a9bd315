"""Per-process materialization and import of bundled agent source trees.

Each distinct source is written once into a private temporary root (removed at
interpreter exit), made read-only, and imported as the synthetic package
``_benchmax_harbor_agent_<hex>`` whose ``__path__`` is that tree; ``sys.path``
is never touched, and two revisions of the same module coexist.
"""

from __future__ import annotations

import atexit
import importlib
import os
import shutil
import sys
import tempfile
import threading
import types
from importlib.machinery import ModuleSpec
from pathlib import Path

__all__ = ["import_bundled_module", "namespace_for"]

_NAMESPACE_PREFIX = "_benchmax_harbor_agent_"
_LOCK = threading.RLock()
_root: Path | None = None
_trees: dict[str, Path] = {}


def namespace_for(content_id: str) -> str:
    """The synthetic package name of a source with this content id."""
    return _NAMESPACE_PREFIX + content_id.removeprefix("sha256:")


def _remove_root(root: Path) -> None:
    for directory, _, _ in os.walk(root):
        try:
            os.chmod(directory, 0o755)
        except OSError:
            pass
    shutil.rmtree(root, ignore_errors=True)


def _private_root() -> Path:
    global _root
    if _root is None:
        _root = Path(tempfile.mkdtemp(prefix="benchmax-harbor-agents-"))
        atexit.register(_remove_root, _root)
    return _root


def _make_read_only(tree: Path) -> None:
    for directory, subdirectories, filenames in os.walk(tree, topdown=False):
        for name in filenames:
            os.chmod(os.path.join(directory, name), 0o444)
        for name in subdirectories:
            os.chmod(os.path.join(directory, name), 0o555)
    os.chmod(tree, 0o555)


def _materialize(content_id: str, files: tuple[tuple[str, bytes], ...]) -> Path:
    tree = _trees.get(content_id)
    if tree is not None:
        return tree
    hex_id = content_id.removeprefix("sha256:")
    root = _private_root()
    staging = root / f".{hex_id}.staging"
    try:
        for relative, content in files:
            target = staging / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    tree = root / hex_id
    staging.rename(tree)
    _make_read_only(tree)
    _trees[content_id] = tree
    return tree


def import_bundled_module(
    content_id: str, files: tuple[tuple[str, bytes], ...], module_name: str
) -> types.ModuleType:
    """Materialize the source (once per process) and import ``module_name`` from it."""
    with _LOCK:
        tree = _materialize(content_id, files)
        namespace = namespace_for(content_id)
        if namespace not in sys.modules:
            package = types.ModuleType(namespace)
            package.__package__ = namespace
            package.__path__ = [str(tree)]
            package.__spec__ = ModuleSpec(namespace, loader=None, is_package=True)
            package.__spec__.submodule_search_locations = [str(tree)]
            sys.modules[namespace] = package
        return importlib.import_module(f"{namespace}.{module_name}")
