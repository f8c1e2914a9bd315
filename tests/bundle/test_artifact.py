"""``Bundle``, ``BundleMetadata`` (canonical JSON) and ``bundle_digest``."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmax.bundle import Bundle, BundleMetadata, bundle_digest

EXAMPLE = BundleMetadata(["Requests >= 2"], "3.12", "0.1.0", "class ExampleEnv: ...\n")
EXAMPLE_JSON = (
    b'{"benchmax_version":"0.1.0","env_class_source":"class ExampleEnv: ...\\n",'
    b'"pip_dependencies":["requests>=2"],"python_version":"3.12"}'
)


def test_to_json_bytes_is_the_documented_canonical_form() -> None:
    assert EXAMPLE.to_json_bytes() == EXAMPLE_JSON


def test_to_json_bytes_keeps_non_ascii_literal_and_escapes_only_controls() -> None:
    source = 'é\u2028\u2029\x7f"\\/\n\r\t\b\f\x01\x1f'

    data = BundleMetadata((), "3.12", "0.2.0", source).to_json_bytes()

    expected = (
        '"env_class_source":"é\u2028\u2029\x7f\\"\\\\/\\n\\r\\t\\b\\f\\u0001\\u001f"'
    ).encode()
    assert expected in data
    assert b'"env_class_source":null' in BundleMetadata((), "3.12", "0.2.0", None).to_json_bytes()


def test_from_json_bytes_round_trips() -> None:
    assert BundleMetadata.from_json_bytes(EXAMPLE_JSON) == EXAMPLE
    assert BundleMetadata.from_json_bytes(bytearray(EXAMPLE_JSON)) == EXAMPLE
    minimal = b'{"benchmax_version":"0.2.0","pip_dependencies":[],"python_version":"3.12"}'
    assert BundleMetadata.from_json_bytes(minimal).env_class_source is None


def test_legacy_keys_are_refused_with_advice_to_rebundle() -> None:
    legacy = json.loads(EXAMPLE_JSON)
    legacy.update(benchmax_runtime_digest="abc", pickled_sha256="def")

    with pytest.raises(ValueError, match=r"unsupported keys.*re-bundle") as caught:
        BundleMetadata.from_json_bytes(json.dumps(legacy).encode())
    assert str(caught.value) == (
        "bundle metadata has unsupported keys ['benchmax_runtime_digest', 'pickled_sha256']; "
        "re-bundle with a current BenchMax release"
    )


@pytest.mark.parametrize(
    "data", [EXAMPLE_JSON.decode(), b"\xff\xfe", b"{not json", b"", memoryview(EXAMPLE_JSON)]
)
def test_from_json_bytes_needs_utf8_json(data: object) -> None:
    with pytest.raises(
        ValueError, match=r"^bundle metadata must be a UTF-8 JSON object$"
    ) as caught:
        BundleMetadata.from_json_bytes(data)  # type: ignore[arg-type]
    assert caught.value.__cause__ is not None


@pytest.mark.parametrize("data", [b"[]", b'"text"', b"1", b"null"])
def test_from_json_bytes_needs_an_object(data: bytes) -> None:
    with pytest.raises(ValueError, match=r"^bundle metadata must be a JSON object$"):
        BundleMetadata.from_json_bytes(data)


@pytest.mark.parametrize(
    ("document", "missing"),
    [
        ({}, "pip_dependencies"),
        ({"pip_dependencies": [], "benchmax_version": "0.2.0"}, "python_version"),
        ({"pip_dependencies": [], "python_version": "3.12"}, "benchmax_version"),
    ],
)
def test_from_json_bytes_names_the_first_missing_key(document: dict, missing: str) -> None:
    with pytest.raises(ValueError) as caught:
        BundleMetadata.from_json_bytes(json.dumps(document).encode())
    assert str(caught.value) == f"bundle metadata is missing {missing!r}"


def test_from_json_bytes_validates_through_the_constructor() -> None:
    base = {"pip_dependencies": [], "python_version": "3.12", "benchmax_version": "0.2.0"}
    with pytest.raises(TypeError, match="pip dependencies must be a sequence"):
        BundleMetadata.from_json_bytes(json.dumps({**base, "pip_dependencies": "x"}).encode())
    with pytest.raises(ValueError, match="python_version must be a non-empty string"):
        BundleMetadata.from_json_bytes(json.dumps({**base, "python_version": ""}).encode())
    with pytest.raises(TypeError, match="env_class_source must be a string or None"):
        BundleMetadata.from_json_bytes(json.dumps({**base, "env_class_source": 1}).encode())


@pytest.mark.parametrize("field", ["python_version", "benchmax_version"])
@pytest.mark.parametrize("value", ["", "   ", None, 3.12])
def test_version_fields_must_be_non_empty_strings(field: str, value: object) -> None:
    with pytest.raises(ValueError) as caught:
        dataclasses.replace(EXAMPLE, **{field: value})
    assert str(caught.value) == f"{field} must be a non-empty string"


def test_version_fields_are_stored_unstripped_and_source_may_be_empty() -> None:
    metadata = BundleMetadata((), " 3.12 ", "0.2.0", "")
    assert metadata.python_version == " 3.12 "
    assert metadata.env_class_source == ""
    with pytest.raises(TypeError, match=r"^env_class_source must be a string or None$"):
        BundleMetadata((), "3.12", "0.2.0", b"class X: ...")  # type: ignore[arg-type]


def test_metadata_and_bundle_are_frozen_hashable_values() -> None:
    bundle = Bundle(b"payload", EXAMPLE)  # positional construction
    with pytest.raises(dataclasses.FrozenInstanceError):
        EXAMPLE.pip_dependencies = ()  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        bundle.pickled = b""  # type: ignore[misc]
    assert [f.name for f in dataclasses.fields(BundleMetadata)] == [
        "pip_dependencies",
        "python_version",
        "benchmax_version",
        "env_class_source",
    ]
    assert [f.name for f in dataclasses.fields(Bundle)] == ["pickled", "metadata"]
    assert hash(bundle) == hash(Bundle(b"payload", dataclasses.replace(EXAMPLE)))
    assert pickle.loads(pickle.dumps(bundle)) == bundle
    assert Bundle(b"", EXAMPLE).pickled == b""


@pytest.mark.parametrize("pickled", [bytearray(b"x"), memoryview(b"x"), "x", None])
def test_bundle_requires_bytes(pickled: object) -> None:
    with pytest.raises(TypeError, match=r"^bundle pickled payload must be bytes$"):
        Bundle(pickled, EXAMPLE)  # type: ignore[arg-type]


def test_bundle_requires_metadata_after_checking_bytes() -> None:
    with pytest.raises(TypeError, match=r"^bundle metadata must be BundleMetadata$"):
        Bundle(b"x", EXAMPLE.to_json_bytes())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="pickled payload"):
        Bundle("x", "not metadata")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("bundle", "digest"),
    [
        (
            Bundle(
                b"pickle",
                BundleMetadata(("requests>=2",), "3.12", "0.1.0", "class ExampleEnv: ...\n"),
            ),
            "962277149279c9e4f8475e21a98c838c8968710f3cc2bbaac810a993d51b9cbe",
        ),
        (
            Bundle(b"", BundleMetadata((), "3.12", "0.2.0", None)),
            "4db6400edf675fe0ad6d39c97957f80c1b2257ff4fb344ff87d91e8f49383607",
        ),
    ],
)
def test_digest_vectors(bundle: Bundle, digest: str) -> None:
    assert bundle_digest(bundle) == digest


def test_digest_follows_the_length_prefixed_recipe() -> None:
    bundle = Bundle(b"\x80\x05payload", EXAMPLE)
    metadata_bytes = EXAMPLE.to_json_bytes()
    expected = hashlib.sha256(
        b"benchmax.bundle.v1\x00"
        + len(bundle.pickled).to_bytes(8, "big")
        + bundle.pickled
        + len(metadata_bytes).to_bytes(8, "big")
        + metadata_bytes
    ).hexdigest()

    assert bundle_digest(bundle) == expected
    assert len(expected) == 64 and expected == expected.lower()


def test_digest_ignores_spelling_but_not_content() -> None:
    spelled = BundleMetadata(["Requests >= 2"], "3.12", "0.2.0", None)
    canonical = BundleMetadata(["requests>=2"], "3.12", "0.2.0", None)
    base = bundle_digest(Bundle(b"p", canonical))

    assert bundle_digest(Bundle(b"p", spelled)) == base
    assert bundle_digest(Bundle(b"q", canonical)) != base
    for change in (
        {"benchmax_version": "0.2.1"},
        {"python_version": "3.11"},
        {"env_class_source": ""},
        {"pip_dependencies": ["requests>=3"]},
    ):
        assert bundle_digest(Bundle(b"p", dataclasses.replace(canonical, **change))) != base


def test_digest_requires_a_bundle() -> None:
    with pytest.raises(TypeError, match=r"^bundle_digest requires a Bundle$"):
        bundle_digest(EXAMPLE)  # type: ignore[arg-type]


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=20), inner, max_size=4)
    ),
    max_leaves=12,
)
_KEYS = st.sampled_from(
    ["pip_dependencies", "python_version", "benchmax_version", "env_class_source", "extra"]
)


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=200),
        _JSON_VALUES.map(lambda v: json.dumps(v).encode()),
        st.dictionaries(_KEYS, _JSON_VALUES | st.lists(st.text(max_size=30), max_size=3)).map(
            lambda d: json.dumps(d).encode()
        ),
    )
)
def test_from_json_bytes_fuzz_raises_only_documented_errors(data: bytes) -> None:
    try:
        metadata = BundleMetadata.from_json_bytes(data)
    except (TypeError, ValueError):
        return
    assert BundleMetadata.from_json_bytes(metadata.to_json_bytes()) == metadata


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.text(st.characters(codec="utf-8"), max_size=30), max_size=4),
    st.text(min_size=1, max_size=10).filter(str.strip),
    st.none() | st.text(max_size=50),
)
def test_metadata_round_trip_fuzz(
    dependencies: list[str], version: str, source: str | None
) -> None:
    try:
        metadata = BundleMetadata(dependencies, "3.12", version, source)
    except ValueError as exc:
        assert "dependenc" in str(exc)
        return
    assert BundleMetadata.from_json_bytes(metadata.to_json_bytes()) == metadata


def test_bundle_repr_shows_the_pickle_size_not_its_bytes() -> None:
    # Constructor arguments (possibly credentials) travel inside the pickle.
    bundle = Bundle(b"api-key=sk-very-secret", EXAMPLE)

    assert repr(bundle) == f"Bundle(pickled=<22 bytes>, metadata={EXAMPLE!r})"
    assert "secret" not in repr(bundle) and "secret" not in str(bundle)


def test_a_name_whose_canonical_form_does_not_parse_is_refused() -> None:
    # packaging parses "0_", but its canonical form "0-" is not a PEP 508 name.
    with pytest.raises(ValueError, match=r"dependency at index 0 is not valid PEP 508: '0_'"):
        BundleMetadata(["0_"], "3.12", "0", None)
