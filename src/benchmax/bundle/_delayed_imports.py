"""Imports executed inside function bodies reachable from an env class, found in bytecode.

A module rebuilt by value from a pickle is not registered in ``sys.modules``, so a later
``import`` (or a literal ``importlib.import_module("...")``) of local source fails remotely.
"""

from __future__ import annotations

import dis
import importlib.util
import sys
from collections.abc import Iterator
from types import CodeType, ModuleType
from typing import Any

__all__ = ["delayed_import_names"]

_CALL_BOUNDARIES = frozenset({"CALL", "RETURN_VALUE", "YIELD_VALUE"})
_IMPORT_CALLABLE_GLOBALS = frozenset({"__import__", "import_module"})
_ATTRIBUTE_LOADS = frozenset({"LOAD_ATTR", "LOAD_METHOD"})


def delayed_import_names(env_class: type, captured_names: frozenset[str]) -> set[str]:
    """Module names imported inside functions reachable from ``env_class`` (unclassified)."""
    return _Scan(env_class, captured_names).run()


class _Scan:
    def __init__(self, env_class: type, captured_names: frozenset[str]) -> None:
        self._root = env_class
        self._captured = captured_names
        self._sources = captured_names | {env_class.__module__}
        self._seen: dict[int, object] = {}
        self._seen_code: dict[int, CodeType] = {}
        self._names: set[str] = set()

    def run(self) -> set[str]:
        stack: list[object] = [self._root]
        while stack:
            value = stack.pop()
            if isinstance(value, staticmethod | classmethod):
                stack.append(value.__func__)
                continue
            if isinstance(value, property):
                stack.extend(f for f in (value.fget, value.fset, value.fdel) if f is not None)
                continue
            if id(value) in self._seen:
                continue
            self._seen[id(value)] = value
            stack.extend(self._children(value))
        return self._names

    def _children(self, value: object) -> list[object]:
        if isinstance(value, ModuleType):
            name = value.__name__
            if name not in self._captured:
                return []
            return [v for v in vars(value).values() if _module_of(v) == name]
        if isinstance(value, type):
            if _module_of(value) not in self._sources:
                return []
            return list(vars(value).values())
        code = _attribute(value, "__code__")
        owner = _module_of(value)
        if not isinstance(code, CodeType) or owner is None or owner not in self._sources:
            return []
        self._collect_imports(code, owner)
        children: list[object] = []
        namespace = _attribute(value, "__globals__")
        if isinstance(namespace, dict):
            children.extend(namespace[n] for n in _all_names(code) if n in namespace)
        defaults = _attribute(value, "__defaults__")
        if isinstance(defaults, tuple):
            children.extend(defaults)
        kwdefaults = _attribute(value, "__kwdefaults__")
        if isinstance(kwdefaults, dict):
            children.extend(kwdefaults.values())
        closure = _attribute(value, "__closure__")
        for cell in closure if isinstance(closure, tuple) else ():
            try:
                children.append(cell.cell_contents)
            except ValueError:  # an empty cell
                continue
        return children

    def _collect_imports(self, code: CodeType, owner: str) -> None:
        for nested in _code_objects(code):
            if id(nested) in self._seen_code:
                continue
            self._seen_code[id(nested)] = nested
            instructions = [i for i in dis.get_instructions(nested) if i.opname != "EXTENDED_ARG"]
            self._names.update(_import_statements(instructions, owner))
            self._names.update(_literal_dynamic_imports(instructions))


def _attribute(value: object, name: str) -> object:
    try:
        return getattr(value, name, None)
    except Exception:  # proxies and lazy objects may raise anything
        return None


def _module_of(value: object) -> str | None:
    module = _attribute(value, "__module__")
    return module if isinstance(module, str) else None


def _code_objects(code: CodeType) -> Iterator[CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, CodeType):
            yield from _code_objects(const)


def _all_names(code: CodeType) -> set[str]:
    names: set[str] = set()
    for nested in _code_objects(code):
        names.update(nested.co_names)
    return names


def _import_statements(instructions: list[dis.Instruction], owner: str) -> set[str]:
    found: set[str] = set()
    for index, instruction in enumerate(instructions):
        if instruction.opname != "IMPORT_NAME" or not isinstance(instruction.argval, str):
            continue
        name = instruction.argval
        level = _const_before(instructions, index, 2)
        fromlist = _const_before(instructions, index, 1)
        resolved = _resolve(name, level if isinstance(level, int) else 0, owner)
        if resolved is None:
            continue
        found.add(resolved)
        if not name and isinstance(fromlist, tuple):
            found.update(
                f"{resolved}.{item}" for item in fromlist if isinstance(item, str) and item != "*"
            )
    return found


def _const_before(instructions: list[dis.Instruction], index: int, distance: int) -> Any:
    position = index - distance
    if position < 0 or instructions[position].opname != "LOAD_CONST":
        return None
    return instructions[position].argval


def _resolve(name: str, level: int, owner: str) -> str | None:
    if level <= 0:
        return name or None
    loaded = sys.modules.get(owner)
    package = getattr(loaded, "__package__", None) if loaded is not None else None
    if not package:
        package = owner.rpartition(".")[0]
    if not package:
        return None
    try:
        return importlib.util.resolve_name("." * level + name, package)
    except (ImportError, ValueError):
        return None


def _literal_dynamic_imports(instructions: list[dis.Instruction]) -> set[str]:
    found: set[str] = set()
    start = 0
    for index, instruction in enumerate(instructions):
        if instruction.opname not in _CALL_BOUNDARIES:
            continue
        if instruction.opname == "CALL":
            name = _imported_literal(instructions[start:index])
            if name is not None:
                found.add(name)
        start = index + 1
    return found


def _imported_literal(window: list[dis.Instruction]) -> str | None:
    """The first non-empty string constant after an import callable is loaded, if any."""
    for position, instruction in enumerate(window):
        is_import_callable = (
            instruction.opname == "LOAD_GLOBAL" and instruction.argval in _IMPORT_CALLABLE_GLOBALS
        ) or (instruction.opname in _ATTRIBUTE_LOADS and instruction.argval == "import_module")
        if not is_import_callable:
            continue
        for later in window[position + 1 :]:
            if later.opname == "LOAD_CONST" and isinstance(later.argval, str) and later.argval:
                return later.argval
        return None
    return None
