"""Bundle files: deterministic zips, verified on read, never unpickled."""

from __future__ import annotations

import io
import os
import pickle
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmax.bundle import (
    Bundle,
    BundleMetadata,
    BundlingError,
    bundle_digest,
    read_bundle,
    save_bundle,
)

METADATA = BundleMetadata(["requests>=2"], "3.12", "0.2.1", "class Env: ...\n")
BUNDLE = Bundle(b"\x80\x05payload-bytes", METADATA)


def zip_bytes(members: list[tuple[str, bytes]], compression: int = zipfile.ZIP_STORED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as archive:
        for name, data in members:
            archive.writestr(name, data)
    return buffer.getvalue()


def valid_members(bundle: Bundle = BUNDLE) -> list[tuple[str, bytes]]:
    return [
        ("metadata.json", bundle.metadata.to_json_bytes()),
        ("env.pkl", bundle.pickled),
        ("digest.txt", bundle_digest(bundle).encode()),
    ]


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    path = tmp_path / "env.bundle"
    save_bundle(BUNDLE, path)
    return path


def test_round_trip(saved: Path) -> None:
    assert read_bundle(saved) == BUNDLE
    assert read_bundle(str(saved)) == BUNDLE


def test_layout_is_fixed(saved: Path) -> None:
    with zipfile.ZipFile(saved) as archive:
        infos = archive.infolist()
        assert [i.filename for i in infos] == ["metadata.json", "env.pkl", "digest.txt"]
        assert {i.compress_type for i in infos} == {zipfile.ZIP_STORED}
        assert {i.date_time for i in infos} == {(1980, 1, 1, 0, 0, 0)}
        assert {i.external_attr for i in infos} == {0o100644 << 16}
        assert {i.create_system for i in infos} == {3}
        assert archive.read("digest.txt") == f"{bundle_digest(BUNDLE)}\n".encode()
        assert archive.read("metadata.json") == METADATA.to_json_bytes()


def test_equal_bundles_give_equal_bytes(tmp_path: Path, saved: Path) -> None:
    other = tmp_path / "elsewhere" / "copy.zip"
    other.parent.mkdir()
    os.utime(saved, (0, 0))
    save_bundle(
        Bundle(
            bytes(BUNDLE.pickled),
            BundleMetadata(["Requests >= 2"], "3.12", "0.2.1", "class Env: ...\n"),
        ),
        other,
    )
    assert other.read_bytes() == saved.read_bytes()
    save_bundle(Bundle(b"different", METADATA), other)
    assert other.read_bytes() != saved.read_bytes()


def test_save_replaces_atomically_and_leaves_no_temporaries(tmp_path: Path, saved: Path) -> None:
    save_bundle(Bundle(b"second", METADATA), saved)
    assert read_bundle(saved).pickled == b"second"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["env.bundle"]


def test_save_requires_a_bundle(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="save_bundle requires a Bundle"):
        save_bundle(METADATA, tmp_path / "x")  # type: ignore[arg-type]


def test_reading_never_unpickles(tmp_path: Path) -> None:
    marker = tmp_path / "executed"

    class Trap:
        def __reduce__(self):
            return (Path.touch, (marker,))

    bundle = Bundle(pickle.dumps(Trap()), METADATA)
    save_bundle(bundle, tmp_path / "trap.zip")

    assert read_bundle(tmp_path / "trap.zip") == bundle
    assert not marker.exists()


def test_missing_file_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_bundle(tmp_path / "absent.zip")


def write(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "candidate.zip"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("data", [b"", b"not a zip at all", b"PK\x05\x06" + b"\x00" * 10])
def test_garbage_is_not_a_readable_archive(tmp_path: Path, data: bytes) -> None:
    with pytest.raises(BundlingError, match="not a readable zip archive"):
        read_bundle(write(tmp_path, data))


@pytest.mark.parametrize("keep", [0.1, 0.5, 0.9, 0.99])
def test_truncated_files_are_refused(tmp_path: Path, saved: Path, keep: float) -> None:
    data = saved.read_bytes()
    with pytest.raises(BundlingError, match="corrupt or truncated"):
        read_bundle(write(tmp_path, data[: int(len(data) * keep)]))


def test_flipped_payload_byte_is_corrupt(tmp_path: Path, saved: Path) -> None:
    data = bytearray(saved.read_bytes())
    data[data.index(b"payload-bytes")] ^= 0xFF
    with pytest.raises(BundlingError, match=r"member 'env\.pkl' cannot be read"):
        read_bundle(write(tmp_path, bytes(data)))


def test_consistently_rewritten_payload_fails_digest(tmp_path: Path) -> None:
    members = valid_members()
    members[1] = ("env.pkl", b"\x80\x05tampered")
    with pytest.raises(BundlingError, match="failed digest verification") as caught:
        read_bundle(write(tmp_path, zip_bytes(members)))
    assert "tampered" in str(caught.value)


def test_rewritten_metadata_fails_digest(tmp_path: Path) -> None:
    members = valid_members()
    members[0] = ("metadata.json", BundleMetadata((), "3.12", "0.2.1", None).to_json_bytes())
    with pytest.raises(BundlingError, match="failed digest verification"):
        read_bundle(write(tmp_path, zip_bytes(members)))


def test_bad_digest_text_fails_digest(tmp_path: Path) -> None:
    members = valid_members()
    members[2] = ("digest.txt", b"\xff" * 64)
    with pytest.raises(BundlingError, match="failed digest verification"):
        read_bundle(write(tmp_path, zip_bytes(members)))


def test_invalid_metadata_is_named(tmp_path: Path) -> None:
    members = valid_members()
    members[0] = ("metadata.json", b'{"pip_dependencies": []}')
    with pytest.raises(BundlingError, match="invalid metadata: bundle metadata is missing"):
        read_bundle(write(tmp_path, zip_bytes(members)))
    members[0] = (
        "metadata.json",
        b'{"pip_dependencies": "x", "python_version": "3.12", "benchmax_version": "0.2.1"}',
    )
    with pytest.raises(BundlingError, match="invalid metadata: pip dependencies"):
        read_bundle(write(tmp_path, zip_bytes(members)))


def test_extra_members_are_refused(tmp_path: Path) -> None:
    with pytest.raises(BundlingError, match=r"unexpected members: \['evil.py'\]"):
        read_bundle(write(tmp_path, zip_bytes([*valid_members(), ("evil.py", b"x")])))


def test_missing_members_are_refused(tmp_path: Path) -> None:
    with pytest.raises(BundlingError, match=r"missing members: \['digest.txt'\]"):
        read_bundle(write(tmp_path, zip_bytes(valid_members()[:2])))


def test_duplicate_members_are_refused(tmp_path: Path) -> None:
    members = [*valid_members(), ("env.pkl", b"second")]
    with pytest.warns(UserWarning, match="Duplicate name"):
        data = zip_bytes(members)
    with pytest.raises(BundlingError, match=r"duplicate members: \['env.pkl'\]"):
        read_bundle(write(tmp_path, data))


def test_compressed_members_are_refused(tmp_path: Path) -> None:
    data = zip_bytes(valid_members(), compression=zipfile.ZIP_DEFLATED)
    with pytest.raises(BundlingError, match=r"'metadata\.json' is compressed or encrypted"):
        read_bundle(write(tmp_path, data))


def test_oversized_members_are_refused_before_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    members = valid_members()
    members[2] = ("digest.txt", b"0" * 129)
    path = write(tmp_path, zip_bytes(members))

    def never(*args: object, **kwargs: object) -> bytes:
        raise AssertionError("a member was read")

    monkeypatch.setattr(zipfile.ZipFile, "read", never)
    monkeypatch.setattr(zipfile.ZipFile, "open", never)
    with pytest.raises(BundlingError, match=r"'digest.txt' is oversized .*129 bytes"):
        read_bundle(path)


def test_pickle_limit_applies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, saved: Path) -> None:
    from benchmax.bundle import _files

    monkeypatch.setitem(_files._MEMBER_LIMITS, "env.pkl", 4)
    with pytest.raises(BundlingError, match=r"'env\.pkl' is oversized"):
        read_bundle(saved)


@pytest.fixture(scope="module")
def valid_file_bytes(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = tmp_path_factory.mktemp("valid") / "bundle.zip"
    save_bundle(BUNDLE, path)
    return path.read_bytes()


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "candidate.zip"


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_read_bundle_fuzz_only_raises_bundling_error(
    data: st.DataObject, valid_file_bytes: bytes, scratch: Path
) -> None:
    original = valid_file_bytes
    candidate = data.draw(
        st.one_of(
            st.binary(max_size=300),
            st.integers(0, len(original) - 1).map(lambda n: original[:n]),
            st.tuples(st.integers(0, len(original) - 1), st.integers(1, 255)).map(
                lambda f: original[: f[0]] + bytes([original[f[0]] ^ f[1]]) + original[f[0] + 1 :]
            ),
            st.binary(max_size=64).map(lambda junk: junk + original),
        )
    )
    scratch.write_bytes(candidate)
    try:
        result = read_bundle(scratch)
    except BundlingError:
        return
    assert result == BUNDLE  # whatever survives verification is the original bundle


def test_metadata_that_cannot_be_written_back_is_invalid(tmp_path: Path) -> None:
    members = valid_members()
    members[0] = (
        "metadata.json",
        b'{"benchmax_version":"0.2.1","env_class_source":"\\ud800",'
        b'"pip_dependencies":[],"python_version":"3.12"}',
    )
    with pytest.raises(BundlingError, match="invalid metadata: 'utf-8' codec can't encode"):
        read_bundle(write(tmp_path, zip_bytes(members)))
