"""``validate_bundle_compatibility`` and the ``_benchmax_version`` seam."""

from __future__ import annotations

import sys

import pytest

import benchmax.bundle
from benchmax.bundle import (
    Bundle,
    BundleMetadata,
    BundlingError,
    IncompatibleBenchmaxError,
    IncompatiblePythonError,
    IncompatibleRuntimeError,
    load_bundle,
    validate_bundle_compatibility,
)

PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


def metadata(benchmax_version: str = "0.2.0", python_version: str = PYTHON) -> BundleMetadata:
    return BundleMetadata((), python_version, benchmax_version, None)


@pytest.fixture
def runtime_021(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("benchmax.bundle._benchmax_version", lambda: "0.2.1")


def test_error_hierarchy() -> None:
    assert issubclass(IncompatiblePythonError, IncompatibleRuntimeError)
    assert issubclass(IncompatibleBenchmaxError, IncompatibleRuntimeError)
    for unrelated in (ValueError, TypeError, BundlingError):
        assert not issubclass(IncompatibleRuntimeError, unrelated)
    assert not issubclass(BundlingError, (IncompatibleRuntimeError, ValueError, TypeError))
    assert str(BundlingError("message")) == "message"


def test_real_version_seam_reads_installed_metadata() -> None:
    version = benchmax.bundle._benchmax_version()
    assert version.startswith("0.2.")
    validate_bundle_compatibility(metadata(version))


def test_seam_reports_unknown_when_metadata_lookup_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> str:
        raise LookupError(name)

    monkeypatch.setattr("importlib.metadata.version", missing)
    assert benchmax.bundle._benchmax_version() == "unknown"


@pytest.mark.parametrize("version", ["0.2.0", "0.2.9.dev3", "0.2", "0.2.1", " 0.2.x"])
def test_same_series_is_compatible(runtime_021: None, version: str) -> None:
    assert validate_bundle_compatibility(metadata(version)) is None


def test_python_must_match_exactly(runtime_021: None) -> None:
    with pytest.raises(IncompatiblePythonError, match=r"Python 0\.0") as caught:
        validate_bundle_compatibility(metadata(python_version="0.0"))
    assert str(caught.value) == (
        f"Bundle was packaged with Python 0.0 but this machine runs Python {PYTHON}."
    )
    with pytest.raises(IncompatiblePythonError):
        validate_bundle_compatibility(metadata(python_version=f"{PYTHON}.1"))


def test_python_is_checked_before_the_benchmax_version(runtime_021: None) -> None:
    with pytest.raises(IncompatiblePythonError):
        validate_bundle_compatibility(metadata("unknown", python_version="2.7"))


@pytest.mark.parametrize("version", ["0.1.2", "0.0.0-incompatible", "1.2.1"])
def test_other_series_is_incompatible(runtime_021: None, version: str) -> None:
    with pytest.raises(IncompatibleBenchmaxError, match=r"major\.minor") as caught:
        validate_bundle_compatibility(metadata(version))
    assert str(caught.value) == (
        f"Bundle was packaged with BenchMax {version} but this runtime uses BenchMax 0.2.1; "
        "major.minor versions must match."
    )


@pytest.mark.parametrize("version", ["not-a-version", "1", "0.2rc1"])
def test_unparsable_versions(runtime_021: None, version: str) -> None:
    with pytest.raises(IncompatibleBenchmaxError, match="Cannot parse") as caught:
        validate_bundle_compatibility(metadata(version))
    assert str(caught.value) == (
        f"Cannot parse BenchMax versions (bundle {version}, runtime 0.2.1); "
        "expected major.minor[.patch]."
    )


def test_unknown_versions_cannot_be_verified(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("benchmax.bundle._benchmax_version", lambda: "unknown")
    with pytest.raises(IncompatibleBenchmaxError, match="Cannot verify") as caught:
        validate_bundle_compatibility(metadata("0.2.0"))
    assert str(caught.value).startswith(
        "Cannot verify BenchMax compatibility because the bundle or runtime version is unknown."
    )
    monkeypatch.setattr("benchmax.bundle._benchmax_version", lambda: "0.2.1")
    with pytest.raises(IncompatibleBenchmaxError, match="Cannot verify"):
        validate_bundle_compatibility(metadata("unknown"))


def test_unparsable_runtime_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("benchmax.bundle._benchmax_version", lambda: "dev")
    with pytest.raises(IncompatibleBenchmaxError, match=r"runtime dev\)"):
        validate_bundle_compatibility(metadata("0.2.0"))


def test_patch_takes_effect_immediately_on_every_call(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    for runtime in ("0.2.5", "0.3.0"):
        monkeypatch.setattr(
            "benchmax.bundle._benchmax_version", lambda r=runtime: calls.append(r) or r
        )
        if runtime == "0.2.5":
            validate_bundle_compatibility(metadata("0.2.0"))
        else:
            with pytest.raises(IncompatibleBenchmaxError):
                validate_bundle_compatibility(metadata("0.2.0"))
    assert calls == ["0.2.5", "0.3.0"]


def test_requires_metadata() -> None:
    with pytest.raises(TypeError, match=r"^bundle compatibility requires BundleMetadata$"):
        validate_bundle_compatibility(Bundle(b"", metadata()))  # type: ignore[arg-type]


def test_load_checks_compatibility_before_unpickling() -> None:
    garbage = Bundle(b"not a pickle", metadata("0.0.0-incompatible"))

    with pytest.raises(IncompatibleBenchmaxError):
        load_bundle(garbage)
    with pytest.raises(IncompatiblePythonError):
        load_bundle(Bundle(b"not a pickle", metadata(python_version="0.0")))
