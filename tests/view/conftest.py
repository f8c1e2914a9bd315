"""Fixtures for the view/show/rescore/compare tests: example runs and a headless browser."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from benchmax.cli import cli

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
ARTIFACTS = Path(os.environ.get("BENCHMAX_ARTIFACTS", REPO / "artifacts"))
CHROMIUM = Path(os.environ.get("BENCHMAX_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip

# name: (class, mock policy, extra run arguments)
EXAMPLE_RUNS: dict[str, tuple[str, str, list[str]]] = {
    "quickstart": ("QuickStartEnv", "reply", []),
    "exact_match": ("ExactMatchEnv", "answer", []),
    "calculator": ("CalculatorEnv", "solve", []),
    "rubric_judge": (
        "RubricJudgeEnv", "respond",
        ["-n", "12", "--env-arg", "judge_base_url=@mock", "--auth", "judge=BENCHMAX_UNSET_VAR"],
    ),
}  # fmt: skip


def invoke(*args: object) -> Any:
    result = CliRunner().invoke(cli, [str(arg) for arg in args])
    assert result.exit_code == 0, result.output
    return result


def run_example(name: str, output: Path) -> Path:
    cls, policy, extra = EXAMPLE_RUNS[name]
    invoke(
        "run", f"{EXAMPLES / name}/env.py:{cls}", "--data", EXAMPLES / name,
        "--mock-policy", f"{EXAMPLES / name}/policy.py:{policy}", "-o", output, *extra,
    )  # fmt: skip
    return output


@pytest.fixture(scope="session")
def example_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Results of every example environment run on its scripted mock policy (once)."""
    directory = tmp_path_factory.mktemp("example-runs")
    return {name: run_example(name, directory / f"{name}.jsonl") for name in EXAMPLE_RUNS}


@pytest.fixture(scope="module")
def chromium(example_runs: dict[str, Path]) -> Iterator[Any]:
    """A headless Debian Chromium driven by Playwright (no browser download).

    Skips when Chromium is not installed, unless ``BENCHMAX_REQUIRE_BROWSER`` is set
    (``.ci/run`` sets it, so CI fails instead of skipping). Playwright's sync API keeps an
    event loop running in this thread while it is open, so ``asyncio.run`` (every ``benchmax
    run``) cannot run meanwhile: the example runs are made first, and the browser closes at
    the end of the module.
    """
    if not CHROMIUM.is_file():
        message = f"{CHROMIUM} not found (apt-get install -y chromium)"
        if os.environ.get("BENCHMAX_REQUIRE_BROWSER"):
            pytest.fail(message)
        pytest.skip(message)
    playwright_api = pytest.importorskip("playwright.sync_api")
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


BROWSER_PATIENCE_MS = 120_000
"""How long a browser action may take (Playwright's default is 30 s): generous, so a busy
machine only makes a test slower, never red."""


@pytest.fixture
def page(chromium: Any) -> Iterator[Any]:
    """A fresh page that records script errors and refuses every network request."""
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(BROWSER_PATIENCE_MS)
    page = context.new_page()
    page.errors = []
    page.requests = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.on("request", lambda request: page.requests.append(request.url))
    try:
        yield page
    finally:
        context.close()


def save_artifact(source: Path, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    target = ARTIFACTS / name
    shutil.copyfile(source, target)
    return target
