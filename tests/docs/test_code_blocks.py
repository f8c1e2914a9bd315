"""Every code block of the README and of the documentation site runs as written.

Python blocks run as scripts (a fresh interpreter of this environment, the repository on
``PYTHONPATH``); bash blocks run in bash. Both run in a scratch directory that links the
repository's files, so what a block writes (``runs/``, a new project) lands there. ``uv run
CMD`` inside a bash block runs CMD from this environment (``uv run --group G`` needs G
installed here: run this test with ``uv run --group trl --group docs pytest -m docs``).
JSON and TOML blocks are parsed. Blocks of other languages are shown, not run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from tests.docs._blocks import DIRECTIVE, REPO, Block, every_block, python_chain

pytestmark = pytest.mark.docs

RUN = {"python", "bash", "sh", "console", "json", "toml"}
# What a scratch directory links from the repository (never .venv, .git or runs/).
LINKED = [
    "README.md", "docs", "examples", "src", "tests", "benchmarks", "pyproject.toml",
    "uv.lock", "pytest.ini", ".python-version", "mkdocs.yml",
]  # fmt: skip
SHIM = """#!/usr/bin/env bash
# `uv run [options] CMD ...` as the docs tests run it: CMD from the environment under test.
set -euo pipefail
if [ "${1:-}" != run ]; then
    echo "docs test: only 'uv run' is available inside a documentation block (got: uv $*)" >&2
    exit 97
fi
shift
while [ $# -gt 0 ]; do
    case "$1" in
        --frozen|--locked|--no-sync|-q|--quiet) shift ;;
        --group|--extra) shift 2 ;;
        --with|--with-requirements)
            echo "docs test: 'uv run --with' cannot run here; mark the block skip" >&2
            exit 97 ;;
        -*) echo "docs test: unknown uv run option $1" >&2; exit 97 ;;
        *) break ;;
    esac
done
command="$1"
shift
if [ -x "$BENCHMAX_DOCS_BIN/$command" ]; then
    exec "$BENCHMAX_DOCS_BIN/$command" "$@"
fi
exec "$BENCHMAX_DOCS_BIN/python" -m "$command" "$@"
"""


def _runnable(block: Block) -> bool:
    return block.language in RUN


BLOCKS = [block for block in every_block() if _runnable(block)]


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    for name in LINKED:
        if (REPO / name).exists():
            (work / name).symlink_to(REPO / name)
    shims = tmp_path / "bin"
    shims.mkdir()
    (shims / "uv").write_text(SHIM)
    (shims / "uv").chmod(0o755)
    return work


def _environment(scratch: Path, block: Block) -> dict[str, str]:
    env = dict(os.environ)
    env.update(block.environment)
    env["PATH"] = f"{scratch.parent / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["BENCHMAX_DOCS_BIN"] = str(Path(sys.executable).parent)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("VIRTUAL_ENV", None)
    return env


@pytest.mark.parametrize("block", BLOCKS, ids=lambda block: block.where)
def test_the_block_runs(block: Block, scratch: Path) -> None:
    if block.skip is not None:
        pytest.skip(block.skip)
    if block.language == "json":
        _parse_json(block)
        return
    if block.language == "toml":
        tomllib.loads(block.code)
        return
    if block.language == "python":
        chain = python_chain(block)
        listing = scratch.parent / "blocks.json"
        listing.write_text(json.dumps([[b.where, b.code] for b in chain]))
        command = [sys.executable, str(REPO / "tests/docs/_run_python_blocks.py"), str(listing)]
    else:
        command = ["bash", "-euo", "pipefail", "-c", block.code]
    completed = subprocess.run(
        command,
        cwd=scratch,
        env=_environment(scratch, block),
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    assert completed.returncode == 0, (
        f"{block.where} exited {completed.returncode}\n--- stdout\n{completed.stdout[-4000:]}"
        f"\n--- stderr\n{completed.stderr[-6000:]}"
    )


def _parse_json(block: Block) -> None:
    try:
        json.loads(block.code)
    except json.JSONDecodeError:
        for number, line in enumerate(block.code.splitlines(), start=1):  # JSON Lines
            if line.strip():
                try:
                    json.loads(line)
                except json.JSONDecodeError as error:
                    raise AssertionError(f"{block.where}: line {number}: {error}") from None


def test_every_directive_is_understood() -> None:
    """A misspelt directive would silently run (or skip) a block: none is misspelt."""
    for path in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "docs:" in line and line.lstrip().startswith("<!--"):
                assert DIRECTIVE.match(line), f"{path}:{number}: unknown directive {line.strip()}"


def test_the_skipped_blocks_stay_a_minority() -> None:
    """A run where (nearly) every block is skipped passes without running anything: a
    directive copied too widely (or a parser that reads every block as skipped) fails here.
    What is skipped, and why, is listed by ``pytest -m docs -rs``."""
    skipped = [block for block in BLOCKS if block.skip is not None]
    assert len(BLOCKS) >= 60, len(BLOCKS)
    assert len(skipped) <= 0.6 * len(BLOCKS), [block.where for block in skipped]
