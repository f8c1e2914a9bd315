"""Package attributes imported on first use (PEP 562), so importing a package stays cheap.

A package's module ``__getattr__`` hands the name to :func:`lazy_attribute` with the map of
which module defines each lazy name; the value is then cached in the package's namespace.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Mapping, MutableMapping

__all__ = ["lazy_attribute", "moved_attribute"]


def lazy_attribute(
    namespace: MutableMapping[str, object], modules: Mapping[str, str], name: str
) -> object:
    """``name`` from the module ``modules[name]`` names, stored in ``namespace`` (a
    package's ``globals()``); ``AttributeError`` for a name the map does not hold.

    Every lazy name of that module is stored at once: importing a submodule binds its own
    name in the package, so a lazy name equal to it (a function ``token_preflight`` defined
    in ``token_preflight.py``) would otherwise stay the module once a sibling name loaded
    it first."""
    module = modules.get(name)
    if module is None:
        raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
    loaded = importlib.import_module(module)
    for sibling, defined_in in modules.items():
        if defined_in == module:
            namespace[sibling] = getattr(loaded, sibling)
    return namespace[name]


def moved_attribute(
    namespace: Mapping[str, object], moved: Mapping[str, tuple[str, str]], name: str
) -> object:
    """A name that moved: ``moved[name]`` is ``(module, new name)``. Returns it with a
    ``DeprecationWarning`` naming where to import it from (the alias lasts one release);
    ``AttributeError`` for a name the map does not hold. Not cached: each use warns."""
    target = moved.get(name)
    if target is None:
        raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
    module, new_name = target
    warnings.warn(
        f"{namespace['__name__']}.{name} is deprecated: use {module}.{new_name} "
        "(the old name goes in benchmax 0.3)",
        DeprecationWarning,
        stacklevel=3,
    )
    return getattr(importlib.import_module(module), new_name)
