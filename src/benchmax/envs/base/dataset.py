"""JSON Lines datasets and safe dataset path resolution."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Generator
from contextlib import closing
from pathlib import Path
from typing import Any, TypeAlias

from benchmax._value_checks import is_int_at_least
from benchmax.envs.dataset import Dataset
from benchmax.envs.shared_types import Example

__all__ = ["JsonRow", "JsonlDataset", "resolve_dataset_path"]

JsonRow: TypeAlias = dict[str, Any]


def resolve_dataset_path(base_dir: Path, relative_path: str) -> Path:
    """Resolve ``relative_path`` under ``base_dir``, refusing paths that escape it.

    Symlinks are resolved before the containment check; the file need not exist.
    """
    if Path(relative_path).is_absolute():
        raise ValueError("dataset paths must be relative to base_dir")
    root = Path(base_dir).expanduser().resolve()
    candidate = (root / relative_path).resolve()
    try:
        candidate.relative_to(root)
    except ValueError as error:
        raise ValueError("dataset paths must stay within base_dir") from error
    return candidate


class JsonlDataset[Payload](Dataset[Payload]):
    """A dataset loaded eagerly from a JSON Lines file, one JSON object per line.

    Blank lines are skipped. Each row dict is turned into an ``Example`` by
    ``row_to_example``, which owns the payload format and the example id
    (typically ``canonical_example_id(payload)``). With ``max_examples`` set,
    reading stops as soon as that many examples are built. Errors name the
    offending ``path:line``.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        row_to_example: Callable[[JsonRow], Example[Payload]],
        max_examples: int | None = None,
    ) -> None:
        if max_examples is not None and not is_int_at_least(max_examples, 1):
            raise ValueError("max_examples must be a positive integer or None")
        data_path = Path(path)
        examples: list[Example[Payload]] = []
        with closing(_read_rows(data_path)) as rows:
            for line_number, row in rows:
                try:
                    example = row_to_example(row)
                except Exception as error:
                    error.add_note(f"while loading {data_path}:{line_number}")
                    raise
                if not isinstance(example, Example):
                    raise TypeError(
                        f"{data_path}:{line_number} row_to_example returned "
                        f"{type(example).__name__}, expected Example"
                    )
                examples.append(example)
                if len(examples) == max_examples:
                    break
        super().__init__(examples)


def _read_rows(data_path: Path) -> Generator[tuple[int, JsonRow], None, None]:
    """Yield ``(line_number, row)`` for each non-blank line, streaming the file.

    Lines are numbered from 1 and split only at ``\\n``, ``\\r\\n`` and ``\\r``:
    a text file opened with ``newline=""`` iterates exactly those physical
    lines (a ``\\r\\n`` pair split across read buffers stays one break), while
    separators such as U+2028 remain ordinary characters inside a line. Bytes that are
    not UTF-8 are decoded as escapes first so the error can name their line.
    """
    with open(data_path, encoding="utf-8", errors="surrogateescape", newline="") as lines:
        for line_number, line in enumerate(lines, start=1):
            if _UNDECODABLE.search(line) is not None:
                raise _decode_error(data_path, line_number, line)
            text = line.strip()
            if not text:
                continue
            try:
                row = json.loads(text)
            except json.JSONDecodeError as error:
                raise ValueError(
                    f"{data_path}:{line_number} contains invalid JSON: {error.msg}"
                ) from error
            if not isinstance(row, dict):
                raise TypeError(f"{data_path}:{line_number} must be a JSON object")
            yield line_number, row


# What "surrogateescape" decodes an invalid byte to (a UTF-8 decoder never yields these).
_UNDECODABLE = re.compile("[\udc80-\udcff]")


def _decode_error(data_path: Path, line_number: int, line: str) -> UnicodeDecodeError:
    """The strict decoder's error for ``line``, its reason naming ``path:line``."""
    raw = line.encode("utf-8", "surrogateescape")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as error:
        start, end, reason = error.start, error.end, error.reason
    else:  # pragma: no cover - the line held an escaped byte, so it cannot decode
        start, end, reason = 0, len(raw), "invalid data"
    return UnicodeDecodeError(
        "utf-8",
        raw,
        start,
        end,
        f"{data_path}:{line_number} is not UTF-8 ({reason}); dataset files must be UTF-8",
    )
