"""Lazy package attributes resolve to what they name, whatever order they are first used in."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGES = ("benchmax._modelhttp", "benchmax.capture", "benchmax.tools", "benchmax.training")

_CHECK = """
import importlib, sys, types
package = importlib.import_module(sys.argv[1])
order = list(package.__all__)
if sys.argv[2] == "reversed":
    order.reverse()
modules = []
for name in order:
    try:
        getattr(package, name)
    except (ImportError, ModuleNotFoundError):  # an optional extra that is not installed
        continue
for name in order:
    if isinstance(package.__dict__.get(name), types.ModuleType):
        modules.append(name)
print(",".join(modules))
"""


@pytest.mark.parametrize("order", ["forward", "reversed"])
@pytest.mark.parametrize("package", PACKAGES)
def test_no_exported_name_turns_into_its_submodule(package: str, order: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CHECK, package, order], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "", f"{package}: these names are modules: {done.stdout}"


def test_the_preflight_function_stays_a_function_after_its_error_type_loads() -> None:
    code = (
        "import benchmax._modelhttp as m\n"
        "m.PreflightProblem\n"
        "assert callable(m.token_preflight), type(m.token_preflight)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("package", PACKAGES)
def test_no_lazy_name_is_also_a_submodule_name(package: str) -> None:
    """Importing ``package.x`` (pkgutil walks, ``from package.x import ...``) binds ``x``
    in the package to the submodule, whatever lazy ``x`` was meant: keep the names apart."""
    module = importlib.import_module(package)
    folder = Path(module.__file__ or "").parent
    submodules = {path.stem for path in folder.glob("*.py")} | {
        path.parent.name for path in folder.glob("*/__init__.py")
    }
    lazy = getattr(module, "_LAZY", None) or module._EXPORTS
    assert sorted(set(lazy) & submodules) == []
