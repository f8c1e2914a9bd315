"""The resume command ``benchmax train`` prints runs as printed: under ``uv run`` it starts
with ``uv run`` and the same options (read from the parent's command line)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from benchmax.cli._launcher import launcher_prefix, uv_run_prefix


def test_the_uv_run_options_before_the_command_are_kept() -> None:
    assert uv_run_prefix(["/usr/bin/uv", "run", "--group", "trl", "benchmax", "train"]) == [
        "uv",
        "run",
        "--group",
        "trl",
    ]
    assert uv_run_prefix(["uv", "run", "--with", "benchmax", "benchmax", "train"]) == [
        "uv",
        "run",
        "--with",
        "benchmax",
    ]
    assert uv_run_prefix(["uv", "run", "python", "-m", "benchmax.cli", "train"]) == ["uv", "run"]
    assert uv_run_prefix(["uv", "run", "--frozen", "-p", "3.12", "pytest"]) == [
        "uv",
        "run",
        "--frozen",
        "-p",
        "3.12",
    ]
    assert uv_run_prefix(["bash", "-c", "benchmax train"]) is None
    assert uv_run_prefix(["uv", "pip", "install", "benchmax"]) is None


def test_outside_uv_nothing_is_added_and_under_uv_the_parent_is_read() -> None:
    assert launcher_prefix({}) == []
    # Under a real uv run, its options are read from the process tree.
    code = "from benchmax.cli._launcher import launcher_prefix; print(launcher_prefix())"
    uv = shutil.which("uv")
    if uv is not None:
        shown = subprocess.run(
            [uv, "run", "--no-sync", "python", "-c", code],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert shown == "['uv', 'run', '--no-sync']"
    # A child of a process that is no uv command line, with UV set: plain uv run.
    shown = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "UV": "/usr/bin/uv"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert shown.startswith("['uv', 'run'")
