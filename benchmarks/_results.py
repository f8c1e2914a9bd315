"""A benchmark's figures as JSON: what docs/performance.md is generated from.

``benchmarks/results/NAME.json`` holds one benchmark's measurements, newest first::

    {
      "title": "Runner overhead",
      "script": "benchmarks/runner_overhead.py",
      "about": "what it measures and how (Markdown)",
      "measurements": [
        {
          "date": "2026-12-04 15:40 UTC",
          "machine": "2 CPUs (x86_64, Linux), load average 4.1 / 3.9 / 3.2, Python 3.12.1",
          "command": "uv run python benchmarks/runner_overhead.py --examples 500",
          "source": "written by the script at commit 6b10703",
          "tables": [{"caption": "", "columns": ["path", "rollouts/s"], "rows": [["...", 243.0]]}],
          "notes": "what the figures mean (Markdown, optional)"
        }
      ]
    }

A script given ``--json PATH`` adds its measurement to PATH (creating the file with the
script's title and ``about`` when it does not exist); ``benchmarks/render_performance.py``
then renders the page. A table cell is a string (written as is) or a number.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results"


def table(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], caption: str = ""
) -> dict[str, Any]:
    if any(len(row) != len(columns) for row in rows):
        raise ValueError(f"every row needs {len(columns)} cells: {rows}")
    return {"caption": caption, "columns": list(columns), "rows": [list(row) for row in rows]}


def this_machine() -> str:
    """CPUs, load average (what else ran matters on a shared machine) and Python."""
    one, five, fifteen = os.getloadavg()
    return (
        f"{os.cpu_count()} CPUs ({platform.machine()}, {platform.system()}), load average "
        f"{one:.1f} / {five:.1f} / {fifteen:.1f}, Python {platform.python_version()}"
    )


def this_commit() -> str:
    def git(*arguments: str) -> str:
        return subprocess.run(
            ["git", *arguments], cwd=REPO, capture_output=True, text=True, check=False
        ).stdout.strip()

    commit = git("rev-parse", "--short", "HEAD")
    if not commit:
        return "written by the script outside a git checkout"
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "src", "benchmarks")
    return f"written by the script at commit {commit}" + (" (with local changes)" if dirty else "")


def this_command() -> str:
    script = Path(sys.argv[0]).resolve()
    shown = script.relative_to(REPO) if script.is_relative_to(REPO) else script
    arguments = []
    skip_next = False
    for argument in sys.argv[1:]:  # where the figures were written is not how they were made
        if skip_next:
            skip_next = False
        elif argument == "--json":
            skip_next = True
        elif not argument.startswith("--json="):
            arguments.append(argument)
    return shlex.join(["uv", "run", "python", str(shown), *arguments])


def record(
    path: Path,
    *,
    title: str,
    about: str,
    tables: Sequence[dict[str, Any]],
    notes: str = "",
) -> None:
    """Add this run's measurement (first) to the results file ``path``."""
    if path.exists():
        results = json.loads(path.read_text(encoding="utf-8"))
    else:
        script = Path(sys.argv[0]).resolve()
        results = {
            "title": title,
            "script": str(script.relative_to(REPO) if script.is_relative_to(REPO) else script),
            "about": about,
            "measurements": [],
        }
    measurement = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": this_machine(),
        "command": this_command(),
        "source": this_commit(),
        "tables": list(tables),
        "notes": notes,
    }
    results["measurements"].insert(0, measurement)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"recorded in {path}; `uv run python benchmarks/render_performance.py` updates the page")
