"""Replacing whole files: exclusive temporary files, links written through, nothing left over."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmax._file_replace import replace_file


def test_a_link_is_written_through_and_keeps_being_a_link(tmp_path: Path) -> None:
    target = tmp_path / "real"
    target.write_bytes(b"old")
    target.chmod(0o640)
    link = tmp_path / "link"
    link.symlink_to(target)
    assert replace_file(link, [b"n", b"ew"]) == target.resolve()
    assert link.is_symlink() and target.read_bytes() == b"new"
    assert target.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "real"]


def test_a_failed_write_leaves_the_target_and_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_bytes(b"old")

    def chunks() -> Iterator[bytes]:
        yield b"half"
        raise OSError("disk gone")

    with pytest.raises(OSError, match="disk gone"):
        replace_file(target, chunks())
    assert target.read_bytes() == b"old" and os.listdir(tmp_path) == ["file"]


def test_a_new_file_gets_the_default_mode(tmp_path: Path) -> None:
    umask = os.umask(0o022)
    try:
        replace_file(tmp_path / "new", b"x")
    finally:
        os.umask(umask)
    assert (tmp_path / "new").stat().st_mode & 0o777 == 0o644
