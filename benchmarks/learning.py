"""Does ``benchmax train`` learn? SmolLM2-135M-Instruct on ``examples/arithmetic``, on CPU.

Trains with ``benchmax.training.train`` (GRPO, TRL, the embedded sampler), then prints:

* the training reward (scalar: ``correct`` + ``bare``, 0 to 2) over the first 5 and the last
  5 steps, each with a percentile-bootstrap 95% interval over its rollouts, and the
  interval of the difference;
* held-out (the eval split, 40 additions never trained on) base vs final with
  ``benchmax compare``'s paired intervals;
* seconds per step (whole step, generation, and the trainer's own part).

With ``--screenshot PNG`` it also saves the training page (``benchmax view OUTPUT``) as
drawn by headless Chromium.

    uv run --group trl python benchmarks/learning.py [--model smollm2-135m-instruct]
        [--steps 40] [--output runs/learning] [--screenshot docs/training-curve.png]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from benchmax.cli._compare_command import render_comparison
from benchmax.results import bootstrap_interval, read_results
from benchmax.results._run_directory import RunDirectory
from benchmax.results._training_page import write_training_page
from benchmax.training import TrainConfig, read_metrics, train

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # examples.arithmetic

from examples.arithmetic.env import ArithmeticEnv  # noqa: E402


def _difference_interval(
    first: Sequence[float], last: Sequence[float], resamples: int = 2000
) -> tuple[float, float]:
    """Percentile bootstrap 95% interval of mean(last) - mean(first), resampling each."""
    rng = random.Random(0)
    means = sorted(
        statistics.fmean(rng.choices(last, k=len(last)))
        - statistics.fmean(rng.choices(first, k=len(first)))
        for _ in range(resamples)
    )
    return means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]


def _step_rewards(rollouts: Path, steps: Sequence[int]) -> list[float]:
    wanted = set(steps)
    return [
        math.fsum(r.rewards.values()) for r in read_results(rollouts).rollouts if r.step in wanted
    ]


def _screenshot(page: Path, png: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path="/usr/bin/chromium", args=["--headless", "--no-sandbox"]
        )
        view = browser.new_page(viewport={"width": 1400, "height": 900})
        view.goto(page.resolve().as_uri())
        view.wait_for_selector("body[data-ready=true]")
        view.locator("#training").screenshot(path=str(png))
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--output", type=Path, default=REPO / "runs" / "learning")
    parser.add_argument("--screenshot", type=Path)
    args = parser.parse_args()
    config = TrainConfig(
        target="examples/arithmetic/env.py:ArithmeticEnv",
        data=REPO / "examples" / "arithmetic",
        model=args.model,
        output_dir=args.output,
        steps=args.steps,
        group_size=4,
        prompts_per_step=2,
        learning_rate=2e-5,
        temperature=0.7,
        max_tokens=16,
        eval_group_size=2,
        save_every=0,
        seed=0,
    )
    started = time.perf_counter()
    result = train(config, ArithmeticEnv)
    wall = time.perf_counter() - started
    layout = RunDirectory(result.output_dir)
    lines = list(read_metrics(layout.metrics))
    steps = [line["step"] for line in lines]
    first = _step_rewards(layout.rollouts, steps[:5])
    last = _step_rewards(layout.rollouts, steps[-5:])
    console = Console()
    console.print(
        f"[bold]{config.model}[/] on examples/arithmetic: {len(steps)} steps, "
        f"{config.prompts_per_step} x {config.group_size} rollouts per step"
    )
    for name, values in (("first 5 steps", first), ("last 5 steps", last)):
        low, high = bootstrap_interval(values)
        console.print(
            f"train reward, {name}: {statistics.fmean(values):.3f} "
            f"[{low:.3f}, {high:.3f}] over {len(values)} rollouts"
        )
    low, high = _difference_interval(first, last)
    console.print(
        f"last 5 - first 5: {statistics.fmean(last) - statistics.fmean(first):+.3f} "
        f"[{low:+.3f}, {high:+.3f}]"
    )
    if result.comparison is not None:
        base, final = layout.eval_file(0), layout.eval_file(layout.eval_steps()[-1])
        console.print("[bold]held out (eval split), base vs final:[/]")
        render_comparison(result.comparison, base, final, console)
    step_seconds = statistics.fmean(line["seconds"]["step"] for line in lines)
    generation = statistics.fmean(line["seconds"]["generation"] or 0.0 for line in lines)
    console.print(
        f"seconds per step: {step_seconds:.1f} (generation {generation:.1f}, the trainer "
        f"{step_seconds - generation:.1f}; evaluations not included); whole run {wall:.0f} s"
    )
    page = write_training_page(layout.root)
    console.print(f"training page: {page.path}")
    if args.screenshot is not None:
        _screenshot(page.path, args.screenshot)
        console.print(f"screenshot: {args.screenshot}")


if __name__ == "__main__":
    main()
