"""PEP 508 canonicalization of ``pip_dependencies`` (shared by metadata and dump_bundle)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.utils import canonicalize_name

from benchmax.bundle import BundleMetadata


def metadata(dependencies: object) -> BundleMetadata:
    return BundleMetadata(dependencies, "3.12", "0.2.0", None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        (
            'Widget[B,a] < 2, >= 1 ; python_version < "3.13"',
            'widget[a,b]<2,>=1; python_version < "3.13"',
        ),
        ("requests >= 2", "requests>=2"),
        ("Requests >= 2", "requests>=2"),
        ("requests (>=2, <3)", "requests<3,>=2"),
        ("x!=1.5,>=1,<2,==1.*", "x!=1.5,<2,==1.*,>=1"),
        ("Foo_Bar.baz[Extra_One, extra.two]~=1.0", "foo-bar-baz[extra-one,extra-two]~=1.0"),
        (
            "foo @ https://example.com/foo-1.0.whl ; python_version<'3.13'",
            'foo @ https://example.com/foo-1.0.whl ; python_version < "3.13"',
        ),
        (
            "foo[x] @ git+https://github.com/a/b.git@main",
            "foo[x] @ git+https://github.com/a/b.git@main",
        ),
        ("  bare  ", "bare"),
    ],
)
def test_single_dependency_is_canonicalized_idempotently(given: str, stored: str) -> None:
    assert metadata([given]).pip_dependencies == (stored,)
    assert metadata([stored]).pip_dependencies == (stored,)


def test_collection_is_sorted_into_a_new_tuple() -> None:
    given = ['Widget[B,a] < 2, >= 1 ; python_version < "3.13"', "requests >= 2"]

    result = metadata(given)
    given.append("late==1")

    assert result.pip_dependencies == (
        "requests>=2",
        'widget[a,b]<2,>=1; python_version < "3.13"',
    )
    assert metadata(tuple(given[:2])) == result


def test_url_with_marker_survives_every_renormalization() -> None:
    original = metadata(["foo @ https://example.com/foo-1.0.whl ; sys_platform == 'linux'"])
    stored = original.pip_dependencies

    assert stored == ('foo @ https://example.com/foo-1.0.whl ; sys_platform == "linux"',)
    assert dataclasses.replace(original, python_version="3.12").pip_dependencies == stored
    assert BundleMetadata.from_json_bytes(original.to_json_bytes()) == original


@pytest.mark.parametrize("value", ["requests>=2", b"requests", {"requests"}, None, iter(["a"])])
def test_non_sequence_collections_are_type_errors(value: object) -> None:
    with pytest.raises(TypeError, match="dependenc") as caught:
        metadata(value)
    assert str(caught.value) == "pip dependencies must be a sequence of PEP 508 strings"


@pytest.mark.parametrize("value", ["", 42, "  ", None])
def test_empty_or_non_string_entries_are_rejected(value: object) -> None:
    with pytest.raises(ValueError, match="dependenc") as caught:
        metadata(["ok", value])
    assert str(caught.value) == "dependency at index 1 must be a non-empty string"


def test_invalid_requirement_names_index_and_original_value() -> None:
    with pytest.raises(ValueError, match="dependenc") as caught:
        metadata([" not a requirement ??? "])
    assert str(caught.value) == (
        "dependency at index 0 is not valid PEP 508: ' not a requirement ??? '"
    )
    assert caught.value.__cause__ is not None


@pytest.mark.parametrize(
    "given",
    [
        ["foo==1", "foo==1"],
        ["foo==1", "Foo==2"],
        ['foo==1; python_version < "3.13"', 'foo==2; sys_platform == "linux"'],
        ["foo[a]>=1", "foo[b]<2"],
        ["foo", "FOO @ https://example.com/f.whl"],
    ],
)
def test_repeated_targets_are_rejected(given: list[str]) -> None:
    with pytest.raises(ValueError, match="target 'foo' is declared more than once") as caught:
        metadata(given)
    assert "(indexes 0 and 1)" in str(caught.value)
    assert "dependenc" in str(caught.value)


def test_extras_equal_after_canonicalization_are_stored_once() -> None:
    (stored,) = metadata(["Foo[Bar_Baz,bar.baz,BAR-BAZ,qux]>=1"]).pip_dependencies
    assert stored == "foo[bar-baz,qux]>=1"
    assert metadata([stored]).pip_dependencies == (stored,)


_NAMES = st.from_regex(r"[A-Za-z][A-Za-z0-9._-]{0,8}[A-Za-z0-9]", fullmatch=True)
_VERSIONS = st.from_regex(r"[0-9]{1,3}(\.[0-9]{1,3}){0,2}", fullmatch=True)
_SPECIFIERS = st.lists(
    st.tuples(st.sampled_from(["==", "!=", ">=", "<=", ">", "<", "~="]), _VERSIONS), max_size=3
).map(lambda items: ", ".join(f"{op} {v}" if op != "~=" else f"~={v}.0" for op, v in items))
_MARKERS = st.sampled_from(
    [
        "",
        "python_version<'3.13'",
        'sys_platform == "linux" and python_version >= "3.10"',
        "(os_name=='nt' or os_name=='posix') and extra == 'Some_Extra'",
    ]
)
_URLS = st.sampled_from(["", "https://example.com/pkg-1.0.whl", "git+https://h.example/a.git@v1"])


@settings(max_examples=150, deadline=None)
@given(_NAMES, st.lists(_NAMES, max_size=3), _SPECIFIERS, _URLS, _MARKERS)
def test_canonical_form_reparses_to_itself(
    name: str, extras: list[str], specifier: str, url: str, marker: str
) -> None:
    text = name + (f"[{', '.join(extras)}]" if extras else "")
    text += f" @ {url} " if url else f" {specifier}"
    text += f"; {marker}" if marker else ""

    (stored,) = metadata([text]).pip_dependencies

    assert metadata([stored]).pip_dependencies == (stored,)
    assert stored == stored.strip() and stored.startswith(canonicalize_name(name))
