"""Issue 38 item 14: the documentation's Python examples work for a pip user. A block that
imports the repository's ``examples`` or ``tests`` packages (absent from an installed
benchmax) says it runs from the repository root; the serving clients and the hand-written
training loops, which users copy, import neither."""

from __future__ import annotations

import re

from tests.docs._blocks import every_block

_REPO_IMPORT = re.compile(r"^\s*(from|import)\s+(examples|tests)(\.|\s)", re.MULTILINE)
_COPIED = ("GenericEnvClient", "httpx.AsyncClient", "RolloutFunc(")


def test_repository_imports_say_where_they_run_from() -> None:
    python = [block for block in every_block() if block.language == "python"]
    assert python
    for block in python:
        if _REPO_IMPORT.search(block.code):
            assert "the repository root" in block.code, block.where


def test_what_users_copy_imports_neither_examples_nor_tests() -> None:
    copied = [
        block
        for block in every_block()
        if block.language == "python" and any(word in block.code for word in _COPIED)
    ]
    assert len(copied) >= 4  # two serving clients, two training loops
    for block in copied:
        assert not _REPO_IMPORT.search(block.code), block.where
