"""Fixtures for the validation tests: a data directory the good environment accepts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROWS = [
    {"prompt": "What is 2 + 2?", "ground_truth": "4"},
    {"prompt": "Name the red planet.", "ground_truth": "Mars"},
    {"prompt": "What is the chemical symbol for gold?", "ground_truth": "Au"},
]


def write_rows(path: Path, rows: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.fixture
def data(tmp_path: Path) -> Path:
    directory = tmp_path / "data"
    directory.mkdir()
    write_rows(directory / "eval.jsonl", ROWS)
    return directory
