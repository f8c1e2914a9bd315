"""Tests for ``canonical_example_id``: the bit-exact vectors and every rejection."""

from __future__ import annotations

import enum
import hashlib
import json
import math
import re
from collections import OrderedDict
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmax.envs import identity
from benchmax.envs.identity import canonical_example_id

VECTORS: list[tuple[Any, str]] = [
    ({}, "bb73190cc06c0a4dccb1f5fdaf4d3348d94c9393fb92ad7dbf9e221b87439b18"),
    ({"x": 1}, "e617f5b5d09dda326d61bd3dc227ef4d4d85c3d493354744588a5807de03e207"),
    ({"x": 1.0}, "e617f5b5d09dda326d61bd3dc227ef4d4d85c3d493354744588a5807de03e207"),
    ({"x": 0}, "08efcc3167f994bb062c3846fadfe7f1468b3b7586e261d346dc784998da11dc"),
    ({"x": -0.0}, "08efcc3167f994bb062c3846fadfe7f1468b3b7586e261d346dc784998da11dc"),
    ({"x": None}, "470ead5291ccf35f8667e217d46da91ab38a0d072c06b177a7812c23bcb06c99"),
    ({"x": True}, "93045d65f18a6bb41b1c7002f66518e6bec8ecdd6f9eee63fe4a34f5c807dc53"),
    ({"x": 0.5}, "475770e68ce8468b93ce706318361dd07dbe76bc10435fb26e04d034b0c9f236"),
    (None, "162d989cb2fa057a6c166368087c595de5a738971cc20347c49cbed2e5684564"),
    ("café", "4beb10eefd7ff0d8ae78351746aa1c193d875d2cccde66fb13b84bde7af72068"),
    ([1, "a", None], "cc86f5b77e778bfc77fc633e37503886f9735b966514f44dfa78fd8b5f6c99ba"),
    ([1, 2], "08f8285084ebf6aa03ce8e57e3b9b7e35c0be8782fd3e74d548190f294793335"),
    ((1, 2), "08f8285084ebf6aa03ce8e57e3b9b7e35c0be8782fd3e74d548190f294793335"),
    (
        {"b": 2, "a": [1, 2.5], "é": "ü"},
        "25ff33823b4e6092a4fec8ac17bd02811442cea7bfd1f76d23f8fbdcd3697804",
    ),
    (
        {"w": 123456.789, "x": 1e-7, "z": 0.1},
        "641b689b6f12eea2f72b8b3281d727c5e159561707bc4ce0401b2c9279e7957e",
    ),
    ({"prompt_messages": []}, "9095387c94443d8dc34013ec6237a3d5d7b757785064505a61b25d0fe647c11c"),
    (
        {"prompt_messages": [{"role": "user", "content": "What is 2 + 2?"}], "answer": "4"},
        "5f1832a278d41344444566c93955383fe06bd09b08b9dda62ed5f5090a0de9e6",
    ),
    ({"x": 2**53 - 1}, "1d9cd9e9711ea0a9f5dc5f30b1c65ba464fe152b31c856fbea52ca69bf31f958"),
    (
        {"x": 9007199254740991.0},
        "1d9cd9e9711ea0a9f5dc5f30b1c65ba464fe152b31c856fbea52ca69bf31f958",
    ),
]


@pytest.mark.parametrize(("value", "expected"), VECTORS)
def test_vectors(value: Any, expected: str) -> None:
    assert canonical_example_id(value) == expected


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@pytest.mark.parametrize(
    ("value", "envelope"),
    [
        ({}, '{"v":1,"value":{}}'),
        ({"x": 1.0}, '{"v":1,"value":{"x":1}}'),
        ({"x": -0.0}, '{"v":1,"value":{"x":0}}'),
        ("café", '{"v":1,"value":"café"}'),
        ({"b": 2, "a": [1, 2.5], "é": "ü"}, '{"v":1,"value":{"a":[1,2.5],"b":2,"é":"ü"}}'),
        (
            {"w": 123456.789, "x": 1e-7, "z": 0.1},
            '{"v":1,"value":{"w":123456.789,"x":1e-07,"z":0.1}}',
        ),
        # Keys sort by code point at every level; U+2028 stays raw; controls escape.
        (
            {"a": {"😀": 1, "\uffff": 2, "é": 3, "a": 4, "_": 5, "Z": 6, "B": 7}},
            '{"v":1,"value":{"a":{"B":7,"Z":6,"_":5,"a":4,"é":3,"\uffff":2,"😀":1}}}',
        ),
        (
            'q"b\\\n\r\t\b\f\x01\u2028',
            '{"v":1,"value":"q\\"b\\\\\\n\\r\\t\\b\\f\\u0001\u2028"}',
        ),
        ([1.5e-300, 2.5, range(2)], '{"v":1,"value":[1.5e-300,2.5,[0,1]]}'),
    ],
)
def test_serialized_envelope(value: Any, envelope: str) -> None:
    assert canonical_example_id(value) == sha(envelope)


def test_semantic_equivalences() -> None:
    assert canonical_example_id({"x": None}) != canonical_example_id({})
    assert canonical_example_id({"x": 1}) == canonical_example_id({"x": 1.0})
    assert canonical_example_id({"x": -0.0}) == canonical_example_id({"x": 0})
    assert canonical_example_id({"x": True}) != canonical_example_id({"x": 1})
    assert canonical_example_id({"x": False}) != canonical_example_id({"x": 0})
    assert canonical_example_id({"a": 1, "b": 2}) == canonical_example_id({"b": 2, "a": 1})
    assert canonical_example_id([1, 2]) != canonical_example_id([2, 1])


def test_other_mappings_sequences_and_subclasses() -> None:
    plain = canonical_example_id({"a": [1, 2], "b": "s"})
    assert canonical_example_id(OrderedDict([("b", "s"), ("a", (1, 2))])) == plain
    assert canonical_example_id(MappingProxyType({"a": range(1, 3), "b": "s"})) == plain

    class Level(enum.IntEnum):
        HIGH = 3

    class Name(str):
        pass

    assert canonical_example_id({"x": Level.HIGH}) == canonical_example_id({"x": 3})
    assert canonical_example_id({Name("x"): Name("v")}) == canonical_example_id({"x": "v"})


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"x": 2**53}, "integers used for identity must fit in JavaScript's safe range"),
        ({"x": -(2**53)}, "integers used for identity must fit in JavaScript's safe range"),
        ({"x": 1e300}, "integers used for identity must fit in JavaScript's safe range"),
        ({"x": 1e16}, "integers used for identity must fit in JavaScript's safe range"),
        ({1: 2}, "JSON object keys used for identity must be strings"),
        ({("a",): 2}, "JSON object keys used for identity must be strings"),
        ({"x": b"b"}, "bytes is not JSON-canonicalizable"),
        ({"x": bytearray(b"a")}, "bytearray is not JSON-canonicalizable"),
        ({"x": {1, 2}}, "set is not JSON-canonicalizable"),
        ({"x": object()}, "object is not JSON-canonicalizable"),
        ({"x": "\ud800"}, "strings used for identity must be valid UTF-8"),
        ({"\udfff": 1}, "strings used for identity must be valid UTF-8"),
        ({"x": math.nan}, "non-finite numbers cannot be used for identity"),
        ({"x": math.inf}, "non-finite numbers cannot be used for identity"),
        ({"x": -math.inf}, "non-finite numbers cannot be used for identity"),
        ([[{"deep": [math.nan]}]], "non-finite"),
    ],
)
def test_rejections(value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        canonical_example_id(value)


def test_safe_range_boundaries_accepted() -> None:
    assert canonical_example_id(-(2**53 - 1)) == sha(f'{{"v":1,"value":{-(2**53 - 1)}}}')
    assert canonical_example_id(-9007199254740991.0) == canonical_example_id(-(2**53 - 1))


def test_module_all() -> None:
    assert identity.__all__ == ["canonical_example_id"]


# Property tests ---------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53 - 1), max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False).filter(
        lambda f: not f.is_integer() or abs(f) <= 2**53 - 1
    )
    | st.text()
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=12,
)


@given(st.dictionaries(st.text(max_size=6), json_values, max_size=6), st.randoms())
def test_id_ignores_key_order_and_copies(value: dict[str, Any], rnd: Any) -> None:
    expected = canonical_example_id(value)
    assert re.fullmatch(r"[0-9a-f]{64}", expected)
    items = list(value.items())
    rnd.shuffle(items)
    assert canonical_example_id(dict(items)) == expected
    assert canonical_example_id(dict(value)) == expected
    assert canonical_example_id(json.loads(json.dumps(value))) == expected


@given(json_values)
def test_id_is_stable_through_a_json_round_trip(value: Any) -> None:
    assert canonical_example_id(json.loads(json.dumps(value))) == canonical_example_id(value)
