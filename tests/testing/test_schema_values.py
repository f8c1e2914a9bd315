"""Schema-valid example arguments for tool_exerciser (checked with jsonschema)."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


TREE = {
    "type": "object",
    "properties": {"root": {"$ref": "#/$defs/node"}},
    "required": ["root"],
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "value": {"type": "integer"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                "parent": {"$ref": "#/$defs/node"},
            },
            "required": ["value", "children"],
        }
    },
}
EXPRESSION = {
    "$ref": "#/$defs/expr",
    "$defs": {
        "expr": {
            "anyOf": [
                {
                    "type": "object",
                    "properties": {
                        "op": {"enum": ["+", "*"]},
                        "args": {"type": "array", "items": {"$ref": "#/$defs/expr"}, "minItems": 2},
                    },
                    "required": ["op", "args"],
                },
                {"type": "number"},
            ]
        }
    },
}
LINKED_LIST = {
    "$ref": "#/definitions/cell",
    "definitions": {
        "cell": {
            "type": "object",
            "properties": {
                "head": {"type": "string"},
                "tail": {"anyOf": [{"$ref": "#/definitions/cell"}, {"type": "null"}]},
            },
            "required": ["head", "tail"],
        }
    },
}
SELF_BY_ROOT = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "items": {"type": "array", "items": {"$ref": "#"}}},
    "required": ["name", "items"],
    "minProperties": 2,
}


@pytest.mark.parametrize("schema", [TREE, EXPRESSION, LINKED_LIST, SELF_BY_ROOT])
def test_recursive_references_get_finite_valid_values(schema: dict[str, Any]) -> None:
    value = example_value(schema)
    jsonschema.validate(value, schema, cls=jsonschema.Draft202012Validator)


def test_a_recursive_reference_nests_once_then_takes_the_smallest_value() -> None:
    assert example_value(TREE) == {"root": {"value": 1, "children": [{"value": 1, "children": []}]}}
    assert example_value(LINKED_LIST) == {"head": "example", "tail": None}
    assert example_value(EXPRESSION) == 1.5  # the branch that does not lead back


def test_the_tool_exerciser_sends_valid_arguments_for_a_recursive_schema() -> None:
    from benchmax.testing import tool_exerciser

    tool = {"type": "function", "function": {"name": "plant", "parameters": TREE}}
    reply = tool_exerciser({"messages": [{"role": "user", "content": "go"}], "tools": [tool]})
    arguments = json.loads(reply["tool_calls"][0]["function"]["arguments"])
    jsonschema.validate(arguments, TREE, cls=jsonschema.Draft202012Validator)


def test_unresolvable_reference_falls_back_to_a_string() -> None:
    assert example_value({"$ref": "#/$defs/missing"}) == "example"


# -- edge cases the fixed table above once got wrong -------------------------------------------

EDGE_SCHEMAS: list[dict[str, Any]] = [
    {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 0.1},
    {"type": "number", "minimum": 2, "maximum": 2},
    {"type": "number", "multipleOf": 0.1, "minimum": 0.25},
    {"type": "number", "multipleOf": 0.01, "minimum": 0.3, "maximum": 0.4},
    {"type": "integer", "minimum": 0, "exclusiveMinimum": True},  # draft-04 spelling
    {
        "type": "array",
        "items": {"type": "integer", "multipleOf": 4},
        "minItems": 3,
        "uniqueItems": True,
    },
    {
        "type": "array",
        "items": {"type": "number", "multipleOf": 0.1},
        "minItems": 5,
        "uniqueItems": True,
    },
    {
        "type": "array",
        "items": {"type": "integer", "default": 2},
        "minItems": 3,
        "uniqueItems": True,
    },
    {"type": "array", "items": {"type": "object"}, "minItems": 3, "uniqueItems": True},
    {
        "type": "array",
        "items": {"type": "array", "items": {"type": "string"}},
        "minItems": 2,
        "uniqueItems": True,
    },
    {"type": "array", "prefixItems": [{"type": "string"}], "items": False},
    {"type": "array", "items": {"type": "string"}, "minItems": 0},
    {"type": "string", "pattern": "^[a-z]+$"},
    {"type": "string", "pattern": "^[0-9]{3}$"},
    {"type": "string", "pattern": "^[A-Z][a-z]+$"},
    {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"},
    {"type": "string", "maxLength": 0},
    {"type": "object", "minProperties": 3, "properties": {"a": {"type": "integer"}}},
    {"type": "object", "minProperties": 2, "additionalProperties": {"type": "boolean"}},
    {
        "type": "object",
        "properties": {
            "card": {"type": "string"},
            "cvv": {"type": "string", "pattern": "^[0-9]{3}$"},
        },
        "required": ["card"],
        "dependentRequired": {"card": ["cvv"]},
    },
]


@pytest.mark.parametrize("schema", EDGE_SCHEMAS, ids=lambda s: str(s)[:60])
def test_edge_case_values_are_valid(schema: dict[str, Any]) -> None:
    draft4 = schema.get("exclusiveMinimum") is True
    validator = jsonschema.Draft4Validator if draft4 else jsonschema.Draft202012Validator
    jsonschema.validate(example_value(schema), schema, cls=validator)


# -- generated schemas ---------------------------------------------------------------------------


def _integers() -> st.SearchStrategy[dict[str, Any]]:
    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "integer"}
        step = draw(st.sampled_from([None, 1, 2, 5]))
        if step is not None:
            schema["multipleOf"] = step
        low = draw(st.none() | st.integers(-1000, 1000))
        if low is not None:
            schema[draw(st.sampled_from(["minimum", "exclusiveMinimum"]))] = low
        if draw(st.booleans()):
            base = low if low is not None else draw(st.integers(-1000, 1000))
            schema[draw(st.sampled_from(["maximum", "exclusiveMaximum"]))] = (
                base + 2 * (step or 1) + draw(st.integers(0, 50))
            )
        return schema

    return build()


def _numbers() -> st.SearchStrategy[dict[str, Any]]:
    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "number"}
        step = draw(st.sampled_from([None, 0.1, 0.25, 0.5, 0.01, 3]))
        if step is not None:
            schema["multipleOf"] = step
        low = draw(st.none() | st.floats(-1e6, 1e6))
        if low is not None:
            schema[draw(st.sampled_from(["minimum", "exclusiveMinimum"]))] = low
        if draw(st.booleans()):
            base = low if low is not None else draw(st.floats(-1e6, 1e6))
            width = draw(st.floats(0.001, 1e3)) + 3 * (step or 0)
            schema[draw(st.sampled_from(["maximum", "exclusiveMaximum"]))] = base + width
        return schema

    return build()


def _strings() -> st.SearchStrategy[dict[str, Any]]:
    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "string"}
        low = draw(st.none() | st.integers(0, 40))
        if low is not None:
            schema["minLength"] = low
        if draw(st.booleans()):
            schema["maxLength"] = (low or 0) + draw(st.integers(0, 10))
        if draw(st.booleans()):
            schema["pattern"] = draw(st.sampled_from(["^[a-z]+$", "[0-9]", "^[A-Za-z0-9_-]*$"]))
            schema.pop("maxLength", None)
            schema.pop("minLength", None)
        return schema

    return build()


_LEAVES = st.one_of(
    _integers(),
    _numbers(),
    _strings(),
    st.just({"type": "boolean"}),
    st.just({"type": "null"}),
    st.builds(lambda v: {"const": v}, st.integers() | st.text(max_size=5)),
    st.builds(
        lambda vs: {"enum": vs},
        st.lists(st.integers() | st.text(max_size=5), min_size=1, max_size=4),
    ),
    st.builds(lambda t: {"type": [t, "null"]}, st.sampled_from(["string", "integer", "number"])),
)
_UNIQUE_FRIENDLY = st.sampled_from(
    [{"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "object"}]
)


def _containers(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    @st.composite
    def obj(draw: st.DrawFn) -> dict[str, Any]:
        properties = draw(st.dictionaries(st.from_regex(r"\A[a-z]{1,6}\Z"), children, max_size=4))
        required = [name for name in properties if draw(st.booleans())]
        schema: dict[str, Any] = {"type": "object", "properties": properties, "required": required}
        if draw(st.booleans()):
            schema["additionalProperties"] = False
        return schema

    @st.composite
    def array(draw: st.DrawFn) -> dict[str, Any]:
        unique = draw(st.booleans())
        schema: dict[str, Any] = {
            "type": "array",
            "items": draw(_UNIQUE_FRIENDLY if unique else children),
            "minItems": draw(st.integers(0, 4)),
        }
        if unique:
            schema["uniqueItems"] = True
        if draw(st.booleans()):
            schema["maxItems"] = schema["minItems"] + draw(st.integers(0, 3))
        return schema

    return obj() | array() | st.builds(lambda b: {"anyOf": [{"type": "null"}, b]}, children)


SIMPLE_SCHEMAS = st.recursive(_LEAVES, _containers, max_leaves=12)


@settings(max_examples=200, deadline=None)
@given(SIMPLE_SCHEMAS)
def test_generated_schemas_get_valid_values(schema: dict[str, Any]) -> None:
    value = example_value(schema)
    jsonschema.validate(value, schema, cls=jsonschema.Draft202012Validator)


def test_array_items_with_a_tight_multiple_of_range_stay_in_range() -> None:
    # Found by the property test: later items' variants ran past ``maximum``.
    schema = {
        "type": "array",
        "items": {
            "type": "array",
            "items": {"type": "number", "multipleOf": 0.1, "minimum": 0.03125, "maximum": 0.39375},
            "minItems": 1,
        },
        "minItems": 3,
    }
    value = example_value(schema)
    jsonschema.validate(value, schema)


def test_a_multiple_that_rounds_below_the_minimum_is_not_taken() -> None:
    # Found by the property test: -190 * 0.01 is -1.9000000000000001, below -1.9.
    schema = {"type": "number", "multipleOf": 0.01, "minimum": -1.9}
    for variant_schema in (schema, {"type": "array", "items": schema, "minItems": 4}):
        value = example_value(variant_schema)
        jsonschema.validate(value, variant_schema)


# -- generated recursive schemas -----------------------------------------------------------------

_DEF_NAMES = ("a", "b", "c")


def _escapable_ref(name: str) -> st.SearchStrategy[dict[str, Any]]:
    """A ``$ref`` to ``name`` in a place a finite value can leave it: an array (no
    ``minItems``), an optional property, or an ``anyOf`` with a leaf beside it."""
    ref = {"$ref": f"#/$defs/{name}"}
    return st.sampled_from(
        [
            {"type": "array", "items": ref},
            {"type": "array", "items": ref, "maxItems": 2},
            {"type": "object", "properties": {"next": ref}},
            {"anyOf": [ref, {"type": "integer"}]},
            {"anyOf": [{"type": "string"}, ref]},
            {"anyOf": [ref, {"type": "null"}]},
        ]
    )


def _refs_without_descent(schema: Any) -> set[str]:
    """The definitions ``schema`` refers to through ``$ref`` and ``anyOf`` alone, without
    going down into an array's items or an object's properties."""
    if not isinstance(schema, dict):
        return set()
    found = set()
    if "$ref" in schema:
        found.add(schema["$ref"].rsplit("/", 1)[-1])
    for branch in schema.get("anyOf", []):
        found |= _refs_without_descent(branch)
    return found


def _validator_terminates(schema: dict[str, Any]) -> bool:
    """False when a definition reaches itself through ``$ref``/``anyOf`` alone (e.g.
    ``a = {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "null"}]}``): such a reference
    consumes none of the value, and jsonschema's validator recurses on it without end."""
    edges = {name: _refs_without_descent(body) for name, body in schema["$defs"].items()}
    for start in edges:
        seen: set[str] = set()
        frontier = set(edges[start])
        while frontier:
            if start in frontier:
                return False
            seen |= frontier
            frontier = set().union(*(edges[name] for name in frontier)) - seen
    return True


_REF_LEAVES = st.sampled_from(_DEF_NAMES).flatmap(_escapable_ref)
_DEF_BODIES = st.recursive(_LEAVES | _REF_LEAVES, _containers, max_leaves=8)
RECURSIVE_SCHEMAS = st.builds(
    lambda a, b, c, start: {"$defs": {"a": a, "b": b, "c": c}, "$ref": f"#/$defs/{start}"},
    _DEF_BODIES,
    _DEF_BODIES,
    _DEF_BODIES,
    st.sampled_from(_DEF_NAMES),
).filter(_validator_terminates)


@settings(max_examples=200, deadline=None)
@given(RECURSIVE_SCHEMAS)
def test_generated_recursive_schemas_get_valid_values(schema: dict[str, Any]) -> None:
    value = example_value(schema)
    jsonschema.validate(value, schema, cls=jsonschema.Draft202012Validator)
