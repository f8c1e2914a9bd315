"""Every ``JsonlDataset`` error names ``path:line``, decoding errors included."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmax.envs.base.dataset import JsonlDataset, JsonRow
from benchmax.envs.identity import canonical_example_id
from benchmax.envs.shared_types import Example


def by_hash(row: JsonRow) -> Example[JsonRow]:
    return Example(id=canonical_example_id(row), payload=row)


@pytest.mark.parametrize(
    ("data", "line", "position", "reason"),
    [
        (b'{"x": "\xff"}\n', 1, 7, "invalid start byte"),
        (b'{"x": 1}\n\n{"x": "caf\xc3"}\n', 3, 10, "invalid continuation byte"),
        (b'{"x": 1}\r\n{"x": 2}\r{"x": "\xe2\x82', 3, 7, "unexpected end of data"),
        (b'{"x": 1}\n{"x": "\xed\xa0\x80"}\n', 2, 7, "invalid continuation byte"),  # a surrogate
        (b'{"x": 1}\n{"x": "\xc0\xaf"}\n', 2, 7, "invalid start byte"),  # overlong "/"
    ],
)
def test_invalid_utf8_names_the_line_and_says_the_file_must_be_utf8(
    tmp_path: Path, data: bytes, line: int, position: int, reason: str
) -> None:
    path = tmp_path / "train.jsonl"
    path.write_bytes(data)
    with pytest.raises(UnicodeDecodeError) as info:
        JsonlDataset(path, row_to_example=by_hash)
    error = info.value
    assert error.encoding == "utf-8" and error.start == position
    assert error.reason == f"{path}:{line} is not UTF-8 ({reason}); dataset files must be UTF-8"
    assert f"{path}:{line} is not UTF-8" in str(error)


def test_a_bad_byte_after_max_examples_is_never_read(tmp_path: Path) -> None:
    path = tmp_path / "train.jsonl"
    path.write_bytes(b'{"x": 1}\n{"x": "\xff"}\n')
    assert len(JsonlDataset(path, row_to_example=by_hash, max_examples=1)) == 1


def test_valid_non_ascii_text_loads_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "train.jsonl"
    text = '{"x": "café ✓ \U0001f600", "y": "\\udc80 escaped stays text"}\n'
    path.write_bytes(text.encode())
    [example] = JsonlDataset(path, row_to_example=lambda row: Example(id="a", payload=row))
    assert example.payload == {"x": "café ✓ \U0001f600", "y": "\udc80 escaped stays text"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"x": 1}\n{"x": \n', ":2 contains invalid JSON: Expecting value"),
        ("\n\n[1, 2]\n", ":3 must be a JSON object"),
        ('{"x": 1}\r\r"text"\r', ":3 must be a JSON object"),
    ],
)
def test_json_errors_name_the_line(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "train.jsonl"
    path.write_text(text, encoding="utf-8", newline="")
    with pytest.raises((ValueError, TypeError)) as info:
        JsonlDataset(path, row_to_example=by_hash)
    assert str(info.value) == f"{path}{expected}"
