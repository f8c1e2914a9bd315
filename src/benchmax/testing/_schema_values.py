"""Deterministic example values that satisfy a (JSON Schema) tool parameter schema.

Covers what tool schemas use in practice: ``type`` (also lists of types), ``const``,
``enum``, ``default``, required object properties (nested), ``minProperties``,
``dependentRequired``, arrays (``items``, ``prefixItems``, ``minItems``/``maxItems``,
``uniqueItems``), string lengths, common formats and simple ``pattern`` regexes (a few
candidate strings are tried), numeric bounds (also draft-04 boolean exclusive bounds)
and ``multipleOf``, ``anyOf``/``oneOf`` (first usable branch), ``allOf`` (merged) and
local ``$ref`` (``#/$defs/...``, ``#/definitions/...``). ``not``, ``if``/``then`` and
``patternProperties`` are ignored.

Recursive ``$ref`` schemas (trees, expressions, linked lists) get finite values: a branch of
``anyOf``/``oneOf`` that leads back to a ``$ref`` being expanded is taken only when every
branch does, and once a ``$ref`` is entered a second time the value below it is the smallest
the schema allows (optional properties omitted, arrays of ``minItems`` items, by default
none). Only a schema with no finite instance (a required property that always recurses)
still ends, past a depth of 32, in ``null``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, cast

from benchmax._value_checks import is_numeric

__all__ = ["example_value"]

_MAX_DEPTH: Final = 32

# Keyed by the schema's "format" value, whatever JSON value it is.
_FORMAT_EXAMPLES: Final[dict[object, str]] = {
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
_PATTERN_CANDIDATES: Final = (
    "a",
    "abc",
    "A",
    "ABC",
    "Abc",
    "1",
    "123",
    "a1",
    "abc123",
    "abc_123",
    "abc-123",
    "a.b",
    "2024-01-01",
    "12:00",
    "+15555550123",
    "user@example.com",
    "https://example.com/",
)


def example_value(schema: object, *, root: object = None) -> object:
    """A JSON value valid for ``schema`` (an object of parameters gives a dict)."""
    return _Generator(schema if root is None else root).value(schema, 0, 0)


@dataclass(frozen=True, slots=True)
class _Path:
    """Where the generator is: the ``$ref`` targets being expanded, and whether one of them
    was entered again (then every value below is the smallest the schema allows)."""

    refs: frozenset[str] = frozenset()
    minimal: bool = False


class _Generator:
    __slots__ = ("_reached", "_root")

    def __init__(self, root: object) -> None:
        self._root = root
        self._reached: dict[str, frozenset[str]] = {}

    def value(self, schema: object, variant: int, depth: int, path: _Path = _Path()) -> object:
        if depth > _MAX_DEPTH:
            return None
        if schema is True or schema is None:
            return "example" if variant == 0 else f"example-{variant + 1}"
        if not isinstance(schema, Mapping):
            return None
        followed: set[str] = set()
        schema = self._resolved(schema, depth, followed)
        path = _Path(path.refs | followed, path.minimal or not followed.isdisjoint(path.refs))
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
                chosen = self._pick_branch(branches, schema, path.refs)
                return self.value(chosen, variant, depth + 1, path)
        match _schema_type(schema):
            case "object":
                return self._object(schema, variant, depth, path)
            case "array":
                return self._array(schema, variant, depth, path)
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

    def _resolved(
        self, schema: Mapping[str, object], depth: int, followed: set[str]
    ) -> Mapping[str, object]:
        """``schema`` with its ``$ref`` and ``allOf`` resolved; the refs followed are added
        to ``followed``."""
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#"):
            target = self._lookup(ref)
            if isinstance(target, Mapping):
                followed.add(ref)
                # Sibling keywords of ``$ref`` refine the referenced schema.
                refined = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
                if depth < _MAX_DEPTH:
                    return self._resolved(refined, depth + 1, followed)
                return refined
        parts = schema.get("allOf")
        if isinstance(parts, list) and parts:
            merged: dict[str, object] = {k: v for k, v in schema.items() if k != "allOf"}
            for part in parts:
                if isinstance(part, Mapping):
                    _merge_into(merged, self._resolved(part, depth + 1, followed))
            return merged
        return schema

    def _pick_branch(
        self, branches: list[object], parent: Mapping[str, object], expanding: frozenset[str]
    ) -> object:
        """The first branch that is not just ``null`` and does not lead back to a ``$ref``
        in ``expanding`` (then the first that is not just ``null``), merged with the
        parent's other keywords."""
        usable = [b for b in branches if not (isinstance(b, Mapping) and b.get("type") == "null")]
        finite = [b for b in branches if self._refs_in(b).isdisjoint(expanding)]
        finite_usable = [b for b in usable if b in finite]
        chosen = (finite_usable or finite or usable or branches)[0]
        if not isinstance(chosen, Mapping):
            return chosen
        siblings = {k: v for k, v in parent.items() if k not in ("anyOf", "oneOf", "default")}
        return {**siblings, **chosen}

    def _refs_in(self, schema: object) -> frozenset[str]:
        """Every local ``$ref`` that ``schema`` leads to, through the refs it holds."""
        found: set[str] = set()
        pending = [schema]
        while pending:
            node = pending.pop()
            if isinstance(node, Mapping):
                ref = node.get("$ref")
                if isinstance(ref, str) and ref.startswith("#") and ref not in found:
                    found.add(ref)
                    pending.append(self._lookup(ref))
                pending.extend(v for k, v in node.items() if k not in ("const", "enum", "default"))
            elif isinstance(node, list):
                pending.extend(node)
        return frozenset(found)

    def _lookup(self, ref: str) -> object:
        node = self._root
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

    def _object(
        self, schema: Mapping[str, object], variant: int, depth: int, path: _Path
    ) -> dict[str, object]:
        properties = schema.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        required = schema.get("required")
        names = (
            [name for name in required if isinstance(name, str)]
            if isinstance(required, list)
            else []
        )
        extra = schema.get("additionalProperties", True)
        optional = [name for name in properties if name not in names]
        minimum = schema.get("minProperties")
        wanted = max(
            minimum if isinstance(minimum, int) else 0, 1 if variant and not path.minimal else 0
        )
        while len(names) < wanted and (optional or extra is not False):
            names.append(optional.pop(0) if optional else f"key{len(names) + 1}")
        dependent = schema.get("dependentRequired")
        if isinstance(dependent, Mapping):
            for name in list(names):
                for needed in dependent.get(name) or ():
                    if isinstance(needed, str) and needed not in names:
                        names.append(needed)
        result: dict[str, object] = {}
        for index, name in enumerate(names):
            subschema = properties.get(name, extra if isinstance(extra, Mapping) else True)
            result[name] = self.value(subschema, variant if index == 0 else 0, depth + 1, path)
        return result

    def _array(
        self, schema: Mapping[str, object], variant: int, depth: int, path: _Path
    ) -> list[object]:
        prefix = schema.get("prefixItems")
        prefix = prefix if isinstance(prefix, list) else []
        items = schema.get("items", True)
        if isinstance(items, list):  # draft-04..07 tuple form
            prefix, items = items, schema.get("additionalItems", True)
        low = schema.get("minItems")
        high = schema.get("maxItems")
        count = max(low if isinstance(low, int) else 0 if path.minimal else 1, len(prefix))
        if items is False:
            count = len(prefix)
        if isinstance(high, int):
            count = min(count, high)
        unique = schema.get("uniqueItems") is True
        values: list[object] = []
        seen: set[str] = set()
        candidate = variant
        while len(values) < count:
            index = len(values)
            if index < len(prefix):
                value = self.value(prefix[index], variant, depth + 1, path)
            else:
                value = self.value(items, candidate, depth + 1, path)
                candidate += 1
                key = json.dumps(value, sort_keys=True, default=repr)
                if unique and key in seen and candidate < variant + 4 * count + 8:
                    continue
                seen.add(key)
            values.append(value)
        return values


def _schema_type(schema: Mapping[str, object]) -> str:
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


def _merge_into(target: dict[str, object], part: Mapping[str, object]) -> None:
    for key, value in part.items():
        if key == "properties" and isinstance(value, Mapping):
            known = cast("Mapping[str, object]", target.get("properties", {}))
            target["properties"] = {**known, **value}
        elif key == "required" and isinstance(value, list):
            target["required"] = [*cast("list[object]", target.get("required", [])), *value]
        else:
            target.setdefault(key, value)


def _limits(schema: Mapping[str, object]) -> tuple[float | None, bool, float | None, bool]:
    """``(low, low_is_exclusive, high, high_is_exclusive)``; ``None`` for no bound."""
    low: float | None = None
    high: float | None = None
    low_open = high_open = False
    minimum, maximum = schema.get("minimum"), schema.get("maximum")
    if is_numeric(minimum):
        low, low_open = minimum, schema.get("exclusiveMinimum") is True  # draft-04 form
    if is_numeric(maximum):
        high, high_open = maximum, schema.get("exclusiveMaximum") is True
    exclusive_low, exclusive_high = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if is_numeric(exclusive_low) and (low is None or exclusive_low >= low):
        low, low_open = exclusive_low, True
    if is_numeric(exclusive_high) and (high is None or exclusive_high <= high):
        high, high_open = exclusive_high, True
    return low, low_open, high, high_open


def _integer(schema: Mapping[str, object], variant: int) -> int:
    low, low_open, high, high_open = _limits(schema)
    first = None if low is None else (math.floor(low) + 1 if low_open else math.ceil(low))
    last = None if high is None else (math.ceil(high) - 1 if high_open else math.floor(high))
    multiple = schema.get("multipleOf")
    step = 1
    if is_numeric(multiple) and multiple >= 1 and float(multiple).is_integer():
        step = int(multiple)
    if first is not None:
        value = -(-first // step) * step + variant * step
    elif last is not None and last < step:
        value = (last // step) * step - variant * step
    else:
        value = step * (1 + variant)
    if last is not None and value > last:
        value = (last // step) * step
    return int(value)


def _number(schema: Mapping[str, object], variant: int) -> float | int:
    multiple = schema.get("multipleOf")
    if is_numeric(multiple) and multiple > 0:
        return _multiple(schema, multiple, variant)
    low, low_open, high, high_open = _limits(schema)
    if low is not None and high is not None:
        if low == high:
            return low
        return low + (high - low) * (1 - 1 / (variant + 2))  # strictly inside
    value: float = 1.5 + variant
    if low is not None and (value < low or (low_open and value == low)):
        value = low + variant + (0.5 if low_open else 0)
    if high is not None and (value > high or (high_open and value == high)):
        value = high - variant - (0.5 if high_open else 0)
    return value


def _multiple(schema: Mapping[str, object], multiple: float, variant: int) -> float | int:
    """A multiple of ``multiple`` within bounds whose quotient is exact in floating point."""
    low, low_open, high, high_open = _limits(schema)
    direction = 1
    if low is not None:
        count = math.ceil(low / multiple)
        if low_open and count * multiple <= low:
            count += 1
    elif high is not None and high < multiple:
        count, direction = math.floor(high / multiple), -1
        if high_open and count * multiple >= high:
            count -= 1
    else:
        count = 1
    start = count
    count += variant * direction
    value: float | int = count * multiple
    for _ in range(64):
        value = count * multiple
        quotient = value / multiple
        exact = not isinstance(multiple, float) or quotient == int(quotient)
        above_low = low is None or value > low or (value == low and not low_open)
        below_high = high is None or value < high or (value == high and not high_open)
        if exact and above_low and below_high:
            break
        count += direction
    else:
        if variant:  # the variant ran past the upper bound: the first fitting multiple
            return _multiple(schema, multiple, 0)
        value = start * multiple
    return int(value) if float(value).is_integer() else value


def _string(schema: Mapping[str, object], variant: int) -> str:
    text = _FORMAT_EXAMPLES.get(schema.get("format", ""), "example")
    if variant:
        text = f"{text}-{variant + 1}" if text == "example" else text
    low = schema.get("minLength")
    high = schema.get("maxLength")
    low = low if isinstance(low, int) else 0
    high = high if isinstance(high, int) else None
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        suffix = str(variant + 1) if variant else ""
        for candidate in (text, *(c + suffix for c in _PATTERN_CANDIDATES), *_PATTERN_CANDIDATES):
            fits = low <= len(candidate) and (high is None or len(candidate) <= high)
            if fits and _matches(pattern, candidate):
                return candidate
    if len(text) < low:
        text += "x" * (low - len(text))
    if high is not None and len(text) > high:
        text = text[:high]
    return text


def _matches(pattern: str, text: str) -> bool:
    try:
        return re.search(pattern, text) is not None
    except re.error:
        return False
