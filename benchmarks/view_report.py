"""The HTML report of a large run: build time and size, and how fast Chromium shows it.

Writes a synthetic results file of 20,000 tool-using rollouts (5,000 groups of 4, the same
generator as the browser test), builds its report with ``write_html_report`` (best of
``--repeats``), then, when Debian's Chromium is installed, opens it headless with Playwright
and times the first page, a termination-reason filter, a text search through every
transcript and opening a group.

    uv run python benchmarks/view_report.py [--groups 5000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.view.conftest import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from tests.view.synthetic import large_run  # noqa: E402

from benchmax.results import write_html_report  # noqa: E402


def build(results: Path, html: Path, repeats: int) -> tuple[float, float, int]:
    """Best wall and CPU seconds of ``repeats`` builds, and the page size in bytes."""
    walls, cpus, size = [], [], 0
    for _ in range(repeats):
        cpu = time.process_time()
        report = write_html_report(results, html)
        cpus.append(time.process_time() - cpu)
        walls.append(report.build_seconds)
        size = report.size_bytes
    return min(walls), min(cpus), size


def browse(html: Path) -> dict[str, float]:
    from playwright.sync_api import sync_playwright

    timings: dict[str, float] = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        started = time.perf_counter()
        page.goto(html.resolve().as_uri())
        page.wait_for_selector("body[data-ready=true]", timeout=60_000)
        timings["first page (s)"] = time.perf_counter() - started
        timings["page script (s)"] = float(page.evaluate("document.body.dataset.renderMs")) / 1000
        started = time.perf_counter()
        page.select_option("#filter-reason", "model_error")
        timings["filter by reason (s)"] = time.perf_counter() - started
        page.select_option("#filter-reason", "")
        started = time.perf_counter()
        page.fill("#filter-text", "timeouterror")
        page.press("#filter-text", "Enter")
        timings["text search (s)"] = time.perf_counter() - started
        started = time.perf_counter()
        page.click("#examples-body tr[data-example-id]")
        page.wait_for_selector("#detail .rollout")
        timings["open a group (s)"] = time.perf_counter() - started
        browser.close()
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        results = large_run(Path(directory) / "large.jsonl", groups=options.groups)
        html = Path(directory) / "large.html"
        wall, cpu, size = build(results, html, options.repeats)
        print(f"results: {results.stat().st_size / 2**20:.1f} MB, {options.groups * 4} rollouts")
        print(f"page:    {size / 2**20:.1f} MB, built in {wall:.2f} s ({cpu:.2f} s CPU)")
        if not CHROMIUM.is_file():
            print(f"{CHROMIUM} not found: skipping the browser timings")
            return
        for name, seconds in browse(html).items():
            print(f"{name:22} {seconds:.3f}")


if __name__ == "__main__":
    main()
