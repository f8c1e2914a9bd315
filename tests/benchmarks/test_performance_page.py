"""docs/performance.md is what benchmarks/render_performance.py renders from the committed
results files, and the cheap benchmarks write results files the page renders."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from benchmarks.render_performance import ORDER, PAGE, RESULTS, render, results_files

REPO = Path(__file__).resolve().parents[2]
FIELDS = {"date", "machine", "command", "source", "tables", "notes"}


def test_the_page_is_rendered_from_the_results_files() -> None:
    assert PAGE.read_text(encoding="utf-8") == render(), (
        "docs/performance.md differs from the results files: "
        "run `uv run python benchmarks/render_performance.py` (never edit the page by hand)"
    )


def test_a_changed_figure_changes_the_page(tmp_path: Path) -> None:
    folder = tmp_path / "results"
    shutil.copytree(RESULTS, folder)
    path = folder / "runner_overhead.json"
    results = json.loads(path.read_text(encoding="utf-8"))
    results["measurements"][0]["tables"][0]["rows"][0][-1] = "12,345"
    path.write_text(json.dumps(results), encoding="utf-8")
    page = render(folder)
    assert page != PAGE.read_text(encoding="utf-8")
    assert "| 12,345 |" in page


@pytest.mark.parametrize("path", results_files(), ids=lambda path: path.stem)
def test_every_results_file_says_where_its_figures_come_from(path: Path) -> None:
    results = json.loads(path.read_text(encoding="utf-8"))
    assert (REPO / results["script"]).is_file(), results["script"]
    assert results["title"] and results["measurements"]
    for measurement in results["measurements"]:
        assert set(measurement) == FIELDS
        assert re.match(r"\d{4}-\d{2}-\d{2}", measurement["date"]), measurement["date"]
        assert measurement["machine"] and measurement["source"]
        assert measurement["command"].startswith("uv run "), measurement["command"]
        assert results["script"] in measurement["command"]
        for table in measurement["tables"]:
            assert all(len(row) == len(table["columns"]) for row in table["rows"])


def test_every_results_file_has_a_place_on_the_page() -> None:
    assert sorted(path.stem for path in results_files()) == sorted(
        path.stem for path in RESULTS.glob("*.json")
    )
    assert {path.stem for path in RESULTS.glob("*.json")} <= set(ORDER)


def _run_benchmark(script: str, *arguments: str) -> None:
    completed = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / script), *arguments],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]


@pytest.mark.parametrize(
    ("script", "arguments", "rows"),
    [
        ("runner_overhead.py", ["--examples", "4", "--group-size", "2", "--repeats", "1"], 2),
        ("stream_readers.py", ["--rollouts", "40", "--commands", "show5"], 2),
    ],
)
def test_a_benchmark_records_a_measurement_the_page_shows(
    tmp_path: Path, script: str, arguments: list[str], rows: int
) -> None:
    folder = tmp_path / "results"
    path = folder / script.replace(".py", ".json")
    _run_benchmark(script, *arguments, "--json", str(path))
    _run_benchmark(script, *arguments, "--json", str(path))  # a second one goes first
    results = json.loads(path.read_text(encoding="utf-8"))
    assert results["script"] == f"benchmarks/{script}"
    first, second = results["measurements"]
    assert first["date"] >= second["date"]
    assert first["command"] == f"uv run python benchmarks/{script} {' '.join(arguments)}"
    assert "CPUs" in first["machine"] and "load average" in first["machine"]
    assert first["source"].startswith("written by the script")
    (table,) = first["tables"]
    assert len(table["rows"]) == rows
    assert all(isinstance(cell, int | float) for cell in table["rows"][-1][1:])
    page = render(folder)
    assert page.count(f"`{first['command']}`") == 2
    assert f"## {results['title']} (`benchmarks/{script}`)" in page
