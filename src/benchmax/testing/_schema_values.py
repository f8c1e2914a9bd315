"""Deterministic example values that satisfy a (JSON Schema) tool parameter schema.

Covers what tool schemas use in practice: ``type`` (also lists of types), ``const``,
``enum``, ``default``, required object properties (nested), arrays (``items``,
``prefixItems``, ``minItems``/``maxItems``), string lengths and common formats, numeric
bounds and ``multipleOf``, ``anyOf``/``oneOf`` (first usable branch), ``allOf`` (merged)
and local ``$ref`` (``#/$defs/...``, ``#/definitions/...``). Regex ``pattern`` is not
solved.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["example_value"]

_MAX_DEPTH: Final = 32

_FORMAT_EXAMPLES: Final[dict[str, str]] = {
    "date-time": "2024-01-01T00:00:00Z",
    "date": "2024-01-01",
    "time": "12:00:00Z",
    "email": "user@example.com",
    "hostname": "example.com",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
    "uri": "https://example.com/",
    "url": "https://example.com/",
    "uri-reference": "https://example.com/",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "duration": "PT1S",
}


def example_value(schema: Any, *, root: Any = None) -> Any:
    """A JSON value valid for ``schema`` (an object of parameters gives a dict)."""
    return _Generator(schema if root is None else root).value(schema, 0, 0)


class _Generator:
    __slots__ = ("_root",)

    def __init__(self, root: Any) -> None:
        self._root = root

    def value(self, schema: Any, variant: int, depth: int) -> Any:
        if depth > _MAX_DEPTH:
            return None
        if schema is True or schema is None:
            return "example" if variant == 0 else f"example-{variant + 1}"
        if not isinstance(schema, Mapping):
            return None
        schema = self._resolved(schema, depth)
        if "const" in schema:
            return schema["const"]
        enum = schema.get("enum")
        if isinstance(enum, list) and enum:
            return enum[variant % len(enum)]
        if "default" in schema and variant == 0:
            return schema["default"]
        for combinator in ("anyOf", "oneOf"):
            branches = schema.get(combinator)
            if isinstance(branches, list) and branches:
                return self.value(_pick_branch(branches, schema), variant, depth + 1)
        match _schema_type(schema):
            case "object":
                return self._object(schema, depth)
            case "array":
                return self._array(schema, depth)
            case "integer":
                return _integer(schema, variant)
            case "number":
                return _number(schema, variant)
            case "boolean":
                return variant % 2 == 0
            case "null":
                return None
            case _:
                return _string(schema, variant)

    def _resolved(self, schema: Mapping[str, Any], depth: int) -> Mapping[str, Any]:
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#"):
            target = self._lookup(ref)
            if isinstance(target, Mapping):
                merged = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
                return self._resolved(merged, depth + 1) if depth < _MAX_DEPTH else merged
        parts = schema.get("allOf")
        if isinstance(parts, list) and parts:
            merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
            for part in parts:
                if isinstance(part, Mapping):
                    _merge_into(merged, self._resolved(part, depth + 1))
            return merged
        return schema

    def _lookup(self, ref: str) -> Any:
        node: Any = self._root
        for token in ref.lstrip("#").split("/"):
            if not token:
                continue
            token = token.replace("~1", "/").replace("~0", "~")
            if isinstance(node, Mapping) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                return None
        return node

    def _object(self, schema: Mapping[str, Any], depth: int) -> dict[str, Any]:
        properties = schema.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        required = schema.get("required")
        names = (
            [name for name in required if isinstance(name, str)]
            if isinstance(required, list)
            else []
        )
        minimum = schema.get("minProperties")
        if isinstance(minimum, int) and minimum > len(names):
            names += [name for name in properties if name not in names][: minimum - len(names)]
        extra = schema.get("additionalProperties", True)
        result: dict[str, Any] = {}
        for name in names:
            subschema = properties.get(name, extra if isinstance(extra, Mapping) else True)
            result[name] = self.value(subschema, 0, depth + 1)
        return result

    def _array(self, schema: Mapping[str, Any], depth: int) -> list[Any]:
        prefix = schema.get("prefixItems")
        prefix = prefix if isinstance(prefix, list) else []
        items = schema.get("items", True)
        if isinstance(items, list):  # draft-04..07 tuple form
            prefix, items = items, schema.get("additionalItems", True)
        low = schema.get("minItems", 1)
        high = schema.get("maxItems")
        count = max(low if isinstance(low, int) else 1, len(prefix), 1)
        if isinstance(high, int):
            count = min(count, high)
        values = []
        for index in range(count):
            subschema = prefix[index] if index < len(prefix) else items
            values.append(self.value(subschema, index, depth + 1))
        return values


def _schema_type(schema: Mapping[str, Any]) -> str:
    declared = schema.get("type")
    if isinstance(declared, list):
        usable = [kind for kind in declared if kind != "null"]
        declared = usable[0] if usable else "null"
    if isinstance(declared, str):
        return declared
    if "properties" in schema or "required" in schema or "additionalProperties" in schema:
        return "object"
    if "items" in schema or "prefixItems" in schema:
        return "array"
    if any(key in schema for key in ("minimum", "maximum", "multipleOf")):
        return "number"
    return "string"


def _pick_branch(branches: list[Any], parent: Mapping[str, Any]) -> Any:
    """The first branch that is not just ``null``, merged with the parent's other keywords."""
    chosen = next(
        (b for b in branches if not (isinstance(b, Mapping) and b.get("type") == "null")),
        branches[0],
    )
    if not isinstance(chosen, Mapping):
        return chosen
    siblings = {k: v for k, v in parent.items() if k not in ("anyOf", "oneOf", "default")}
    return {**siblings, **chosen}


def _merge_into(target: dict[str, Any], part: Mapping[str, Any]) -> None:
    for key, value in part.items():
        if key == "properties" and isinstance(value, Mapping):
            target["properties"] = {**target.get("properties", {}), **value}
        elif key == "required" and isinstance(value, list):
            target["required"] = [*target.get("required", []), *value]
        else:
            target.setdefault(key, value)


def _bounds(schema: Mapping[str, Any], step: float) -> tuple[float, float]:
    low, high = -math.inf, math.inf
    if _is_number(schema.get("minimum")):
        low = schema["minimum"]
    if _is_number(schema.get("exclusiveMinimum")):
        low = max(low, schema["exclusiveMinimum"] + step)
    if _is_number(schema.get("maximum")):
        high = schema["maximum"]
    if _is_number(schema.get("exclusiveMaximum")):
        high = min(high, schema["exclusiveMaximum"] - step)
    return low, high


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _integer(schema: Mapping[str, Any], variant: int) -> int:
    low, high = _bounds(schema, 1)
    start = math.ceil(low) if low > -math.inf else (min(1, math.floor(high)) if high < 1 else 1)
    value = start + variant
    multiple = schema.get("multipleOf")
    if _is_number(multiple) and multiple > 0:
        value = math.ceil(value / multiple) * multiple
        value = int(value)
    if value > high:
        value = math.floor(high)
    return int(value)


def _number(schema: Mapping[str, Any], variant: int) -> float | int:
    multiple = schema.get("multipleOf")
    if _is_number(multiple) and multiple > 0:
        low, high = _bounds(schema, multiple)
        start = low if low > -math.inf else (high if high < multiple else multiple)
        count = math.ceil(start / multiple) + variant
        value = count * multiple
        return int(value) if float(value).is_integer() else value
    low, high = _bounds(schema, 0.5)
    value = 1.5 + variant
    if value < low:
        value = low + variant
    if value > high:
        value = high
    return value


def _string(schema: Mapping[str, Any], variant: int) -> str:
    text = _FORMAT_EXAMPLES.get(schema.get("format", ""), "example")
    if variant:
        text = f"{text}-{variant + 1}" if text == "example" else text
    low = schema.get("minLength")
    high = schema.get("maxLength")
    if isinstance(low, int) and len(text) < low:
        text += "x" * (low - len(text))
    if isinstance(high, int) and len(text) > high:
        text = text[:high]
    return text
