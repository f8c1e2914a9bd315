"""Which modules a pickle needs: replay it with a recording unpickler, never scan bytes.

The replay resolves classes normally (importing their modules is an accepted side effect) but
neutralizes the two cloudpickle state setters, so replaying in the authoring process never
overwrites the members of live classes or functions.
"""

from __future__ import annotations

import io
import pickle
from types import ModuleType

__all__ = ["referenced_modules"]


class _Placeholder:
    """Stands in for a class that cannot be resolved, so the replay can go on."""

    def __new__(cls, *args: object, **kwargs: object) -> _Placeholder:
        return super().__new__(cls)

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def __call__(self, *args: object, **kwargs: object) -> _Placeholder:
        return self


def _keep_first(obj: object, *args: object, **kwargs: object) -> object:
    return obj


class _RecordingUnpickler(pickle.Unpickler):
    def __init__(self, data: bytes, names: set[str]) -> None:
        super().__init__(io.BytesIO(data))
        self._names = names

    def find_class(self, module: str, name: str) -> object:
        self._names.add(module)
        if module.startswith("cloudpickle"):
            if name == "subimport":
                return self._subimport
            if name in ("_class_setstate", "_function_setstate"):
                return _keep_first
        try:
            return super().find_class(module, name)
        except Exception:
            return _Placeholder

    def _subimport(self, name: str, *args: object, **kwargs: object) -> ModuleType:
        # cloudpickle stores a module object held in globals as ``subimport("name")``.
        self._names.add(name)
        return ModuleType(str(name))


def referenced_modules(pickled: bytes) -> set[str]:
    """Names of the modules a fresh interpreter would import to load ``pickled``."""
    names: set[str] = set()
    try:
        _RecordingUnpickler(pickled, names).load()
    except Exception:  # whatever was recorded before the failure is the answer
        pass
    return {name for name in names if isinstance(name, str)}
