"""Schema-valid example arguments for tool_exerciser (checked with jsonschema)."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from benchmax.testing import example_value

SCHEMAS: list[dict[str, Any]] = [
    {"type": "string"},
    {"type": "string", "minLength": 20},
    {"type": "string", "maxLength": 3},
    {"type": "string", "format": "email"},
    {"type": "string", "format": "date-time"},
    {"type": "integer"},
    {"type": "integer", "minimum": 7},
    {"type": "integer", "maximum": -3},
    {"type": "integer", "exclusiveMinimum": 10, "exclusiveMaximum": 12},
    {"type": "integer", "minimum": 5, "multipleOf": 4},
    {"type": "number"},
    {"type": "number", "minimum": 10.5},
    {"type": "number", "maximum": 0.25},
    {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
    {"type": "number", "multipleOf": 0.5, "minimum": 3},
    {"type": "boolean"},
    {"type": "null"},
    {"type": ["null", "integer"], "minimum": 2},
    {"enum": ["a", "b"]},
    {"type": "string", "enum": ["x"]},
    {"const": 42},
    {"type": "integer", "default": 9},
    {"type": "array", "items": {"type": "integer", "minimum": 3}},
    {"type": "array", "items": {"type": "string"}, "minItems": 3, "uniqueItems": True},
    {"type": "array", "items": {"type": "integer"}, "minItems": 2, "uniqueItems": True},
    {"type": "array", "maxItems": 0},
    {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "boolean"}]},
    {"anyOf": [{"type": "null"}, {"type": "string", "minLength": 2}]},
    {"oneOf": [{"type": "integer", "minimum": 3}, {"type": "string"}]},
    {
        "allOf": [
            {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
            {"properties": {"b": {"type": "string"}}, "required": ["b"]},
        ]
    },
    {
        "type": "object",
        "properties": {
            "user": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "roles": {
                        "type": "array",
                        "items": {"type": "string", "enum": ["admin", "dev"]},
                        "minItems": 1,
                    },
                    "address": {
                        "type": "object",
                        "properties": {"zip": {"type": "string", "minLength": 5}},
                        "required": ["zip"],
                    },
                },
                "required": ["name", "roles", "address"],
                "additionalProperties": False,
            },
            "optional": {"type": "integer"},
        },
        "required": ["user"],
        "additionalProperties": False,
    },
    {
        "type": "object",
        "properties": {"item": {"$ref": "#/$defs/item"}},
        "required": ["item"],
        "$defs": {
            "item": {
                "type": "object",
                "properties": {"id": {"type": "integer", "minimum": 100}},
                "required": ["id"],
            }
        },
    },
    {
        "type": "object",
        "properties": {"node": {"$ref": "#/definitions/node"}},
        "required": ["node"],
        "definitions": {
            "node": {
                "type": "object",
                "properties": {"next": {"$ref": "#/definitions/node"}, "v": {"type": "string"}},
                "required": ["v"],
            }
        },
    },
    {"type": "object", "required": ["free"], "additionalProperties": {"type": "integer"}},
    {"type": "object", "properties": {"a": {"type": "string"}}, "minProperties": 1},
    {"properties": {"implicit": {"type": "boolean"}}, "required": ["implicit"]},
    {},
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: str(s)[:60])
def test_example_value_is_valid(schema: dict[str, Any]) -> None:
    value = example_value(schema)
    jsonschema.validate(value, schema, format_checker=jsonschema.FormatChecker())


def test_required_properties_only_and_nested_objects() -> None:
    value = example_value(SCHEMAS[-7])
    assert value == {"user": {"name": "example", "roles": ["admin"], "address": {"zip": "example"}}}


def test_const_enum_and_default_are_preferred() -> None:
    assert example_value({"const": "v"}) == "v"
    assert example_value({"type": "string", "enum": ["b", "a"]}) == "b"
    assert example_value({"type": "integer", "default": 9}) == 9


def test_values_are_deterministic() -> None:
    for schema in SCHEMAS:
        assert example_value(schema) == example_value(schema)


def test_recursive_reference_terminates() -> None:
    schema = {
        "$ref": "#/$defs/loop",
        "$defs": {
            "loop": {
                "type": "object",
                "properties": {"x": {"$ref": "#/$defs/loop"}},
                "required": ["x"],
            }
        },
    }
    value = example_value(schema)
    assert isinstance(value, dict)


def test_unresolvable_reference_falls_back_to_a_string() -> None:
    assert example_value({"$ref": "#/$defs/missing"}) == "example"
