"""Bundle files: one deterministic zip holding metadata, pickle and digest.

Members are written ``ZIP_STORED`` in a fixed order with fixed timestamps and attributes, so
equal bundles give byte-identical files on every machine. Reading checks the member names and
sizes before reading anything, verifies the digest, and never unpickles.
"""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path
from typing import BinaryIO

from benchmax._file_replace import replace_file
from benchmax.bundle._artifact import Bundle, BundleMetadata, bundle_digest
from benchmax.bundle._errors import BundlingError

__all__ = ["read_bundle", "save_bundle"]

METADATA_MEMBER = "metadata.json"
PICKLE_MEMBER = "env.pkl"
DIGEST_MEMBER = "digest.txt"

_MEMBER_LIMITS = {
    METADATA_MEMBER: 16 * 1024 * 1024,
    PICKLE_MEMBER: 2 * 1024 * 1024 * 1024,
    DIGEST_MEMBER: 128,
}
_FIXED_DATE_TIME = (1980, 1, 1, 0, 0, 0)
_UNIX = 3
_REGULAR_FILE_0644 = 0o100644 << 16


def save_bundle(bundle: Bundle, path: str | os.PathLike[str]) -> None:
    """Write ``bundle`` to ``path`` as a deterministic zip, replacing any existing file."""
    if not isinstance(bundle, Bundle):
        raise TypeError("save_bundle requires a Bundle")
    target = Path(path)
    members = (
        (METADATA_MEMBER, bundle.metadata.to_json_bytes()),
        (PICKLE_MEMBER, bundle.pickled),
        (DIGEST_MEMBER, f"{bundle_digest(bundle)}\n".encode("ascii")),
    )
    archive = io.BytesIO()
    _write_archive(archive, members)
    replace_file(target, archive.getvalue())


def _write_archive(handle: BinaryIO, members: tuple[tuple[str, bytes], ...]) -> None:
    with zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_STORED) as archive:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=_FIXED_DATE_TIME)
            info.compress_type = zipfile.ZIP_STORED
            info.create_system = _UNIX
            info.external_attr = _REGULAR_FILE_0644
            archive.writestr(info, data)


def read_bundle(path: str | os.PathLike[str]) -> Bundle:
    """Read and verify a bundle file written by ``save_bundle``; nothing is unpickled.

    A corrupt, truncated or tampered file, or invalid metadata, raises ``BundlingError``
    naming the problem. (A missing or unreadable file raises the usual ``OSError``.)
    """
    source = Path(path)
    with source.open("rb") as handle:
        members = _read_members(handle, source)
    try:
        metadata = BundleMetadata.from_json_bytes(members[METADATA_MEMBER])
        bundle = Bundle(pickled=members[PICKLE_MEMBER], metadata=metadata)
        # Parsed metadata that cannot be written back canonically (e.g. a lone surrogate
        # escaped in a JSON string) fails here with UnicodeEncodeError.
        computed = bundle_digest(bundle)
    except (TypeError, ValueError) as exc:
        raise BundlingError(f"bundle file {source} has invalid metadata: {exc}") from exc
    recorded = members[DIGEST_MEMBER].removesuffix(b"\n")
    if recorded != computed.encode("ascii"):
        raise BundlingError(
            f"bundle file {source} failed digest verification (recorded "
            f"{recorded[:64]!r}, computed {computed!r}): it was tampered with or corrupted"
        )
    return bundle


def _read_members(handle: BinaryIO, source: Path) -> dict[str, bytes]:
    try:
        archive = zipfile.ZipFile(handle)
    except Exception as exc:  # zipfile raises many kinds of error on garbage input
        raise BundlingError(
            f"bundle file {source} is not a readable zip archive (corrupt or truncated): {exc}"
        ) from exc
    with archive:
        infos = archive.infolist()
        names = [info.filename for info in infos]
        unexpected = sorted(set(names) - set(_MEMBER_LIMITS))
        if unexpected:
            raise BundlingError(f"bundle file {source} has unexpected members: {unexpected}")
        duplicated = sorted({name for name in names if names.count(name) > 1})
        if duplicated:
            raise BundlingError(f"bundle file {source} has duplicate members: {duplicated}")
        missing = [name for name in _MEMBER_LIMITS if name not in names]
        if missing:
            raise BundlingError(f"bundle file {source} is missing members: {missing}")
        for info in infos:
            _check_member(info, source)
        members: dict[str, bytes] = {}
        for info in infos:
            try:
                members[info.filename] = archive.read(info)
            except Exception as exc:
                raise BundlingError(
                    f"bundle file {source} is corrupt or truncated: "
                    f"member {info.filename!r} cannot be read: {exc}"
                ) from exc
    return members


def _check_member(info: zipfile.ZipInfo, source: Path) -> None:
    name = info.filename
    if info.compress_type != zipfile.ZIP_STORED or info.flag_bits & 0x1:
        raise BundlingError(
            f"bundle file {source}: member {name!r} is compressed or encrypted; "
            "bundle files store members uncompressed"
        )
    limit = _MEMBER_LIMITS[name]
    if info.file_size > limit or info.compress_size != info.file_size:
        raise BundlingError(
            f"bundle file {source}: member {name!r} is oversized or inconsistent "
            f"({info.file_size} bytes declared, {info.compress_size} stored, limit {limit})"
        )
